// A worker's models (DESIGN.md §4.9): pager regions and ledger models by key, ledger loads against
// the device, the ledger's view synced with what the device still holds, and faults and unpins.
#include "worker_memory.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "orch/plugins/names.hpp"

namespace orch::worker {

result<model_region*> worker_memory::region(const std::string& key, std::uint64_t bytes,
                                            bool& created) {
  created = false;
  if (auto it = regions_.find(key); it != regions_.end()) return it->second.get();
  auto r = std::make_unique<model_region>();
  r->key = key;
  r->size = bytes;
  if (pager_ != nullptr) {
    const orch_status st = pager_api_->region_create(pager_, bytes, &r->pager_region, nullptr);
    if (st != ORCH_OK) return error{plugins::status_name(st), "region_create failed"};
  } else if (ledger_ != nullptr) {
    const orch_status st = ledger_api_->model_add(ledger_, bytes, &r->ledger_model);
    if (st != ORCH_OK) return error{plugins::status_name(st), "the ledger refused the model"};
    // Listed before it loads: the device memory follows the ledger for every listed model.
    model_region& added = *regions_.emplace(key, std::move(r)).first->second;
    if (auto loaded = load_ledger_model(added); !loaded) {
      ledger_api_->model_remove(added.ledger_model);
      if (added.held > 0) backend_->api().phys_release(backend_->device(), added.handle);
      regions_.erase(key);
      return loaded.err();
    }
    created = true;
    return &added;
  } else {
    return error{"unsupported", "this worker runs without a pager or a ledger"};
  }
  created = true;
  model_region* out = r.get();
  regions_.emplace(key, std::move(r));
  return out;
}

status worker_memory::load_ledger_model(model_region& r) {
  // ComfyUI loads a whole model only when the device has it free plus the reserve
  // (free_memory(memory_required + extra_reserved_memory)); other processes' memory counts.
  // This worker's own older models go first, in ComfyUI's order; only then is the host asked.
  const std::uint64_t needed = saturating_add(r.size, settings_.memory.reserve_vram);
  std::uint64_t free_bytes = 0, total = 0;
  if (backend_->api().mem_get_info(backend_->device(), &free_bytes, &total) == ORCH_OK &&
      free_bytes < needed) {
    evict(needed - free_bytes);
    if (backend_->api().mem_get_info(backend_->device(), &free_bytes, &total) == ORCH_OK &&
        free_bytes < needed) {
      last_required_ = needed;
      return error{"out_of_memory", "the device has " + std::to_string(free_bytes) +
                                        " bytes free; the model " + r.key + " needs " +
                                        std::to_string(needed) + " with the reserve"};
    }
  }
  std::uint64_t loaded = 0;
  const orch_status st = ledger_api_->model_load(r.ledger_model, 0.0, &loaded);
  if (st != ORCH_OK && st != ORCH_OOM_RETRYABLE) {
    return error{plugins::status_name(st), "the ledger could not load the model"};
  }
  const orch_status created = sync_ledger_memory();
  if (r.held >= r.size) return ok_status();
  // The device did not give the memory: the model is unloaded again. Only an out-of-memory
  // answer tells the host how much is needed (it may evict through its stand-ins and retry).
  std::uint64_t freed = 0;
  ledger_api_->model_unload(r.ledger_model, &freed);
  sync_ledger_memory();
  if (created != ORCH_OOM_RETRYABLE && created != ORCH_OK) {
    return error{plugins::status_name(created),
                 "the backend could not allocate the model " + r.key + " on the device"};
  }
  last_required_ = needed;
  return error{"out_of_memory", "the device cannot hold the model " + r.key + " (" +
                                    std::to_string(r.size) + " bytes)"};
}

orch_status worker_memory::sync_ledger_memory() noexcept {
  // The ledger keeps accounts only; the device memory follows its figures here. Releases first,
  // so a model evicted to make room gives its bytes back before the new one takes them.
  std::uint64_t granularity = 1;
  if (backend_->api().granularity(backend_->device(), &granularity) != ORCH_OK ||
      granularity == 0) {
    granularity = 1;
  }
  orch_status result = ORCH_OK;
  std::vector<model_region*> grow;
  try {
    grow.reserve(regions_.size());
  } catch (...) {
    return ORCH_OOM_RETRYABLE;
  }
  for (auto& [key, r] : regions_) {
    if (r->ledger_model == nullptr) continue;
    orch_ledger_model_info info{};
    info.struct_size = sizeof(info);
    if (ledger_api_->model_info(r->ledger_model, &info) != ORCH_OK) continue;
    if (info.loaded == r->held) continue;
    if (r->held > 0) {
      backend_->api().phys_release(backend_->device(), r->handle);
      r->held = 0;
    }
    if (info.loaded > 0) grow.push_back(r.get());
  }
  for (model_region* r : grow) {
    orch_ledger_model_info info{};
    info.struct_size = sizeof(info);
    if (ledger_api_->model_info(r->ledger_model, &info) != ORCH_OK) continue;
    const std::uint64_t units = info.loaded / granularity + (info.loaded % granularity ? 1 : 0);
    const std::uint64_t rounded =
        units > UINT64_MAX / granularity ? UINT64_MAX : units * granularity;
    const orch_status st = backend_->api().phys_create(backend_->device(), rounded, &r->handle);
    if (st == ORCH_OK) {
      r->held = info.loaded;
    } else {
      spdlog::warn("ledger model {}: allocating {} bytes on the device answered {}", r->key,
                   rounded, plugins::status_name(st));
      result = st;
    }
  }
  return result;
}

orch_status worker_memory::fault(model_region* r, std::uint64_t offset, std::uint64_t size) {
  if (r->pager_region != nullptr) {
    const orch_status st =
        pager_api_->region_fault(r->pager_region, offset, size, nullptr, 0, nullptr, nullptr);
    if (st == ORCH_OK) pins_.push_back({r, offset, size});
    return st;
  }
  if (r->ledger_model != nullptr) {
    if (r->held >= r->size) return ORCH_OK;
    return load_ledger_model(*r).ok() ? ORCH_OK : ORCH_OOM_RETRYABLE;
  }
  return ORCH_UNSUPPORTED;
}

orch_status worker_memory::unpin(model_region* r, std::uint64_t offset, std::uint64_t size) {
  if (r->pager_region == nullptr) return r->ledger_model != nullptr ? ORCH_OK : ORCH_UNSUPPORTED;
  auto it = std::find_if(pins_.begin(), pins_.end(), [&](const pin& p) {
    return p.region == r && p.offset == offset && p.size == size;
  });
  if (it == pins_.end()) return ORCH_INVALID;  // never faulted (or already unpinned)
  pins_.erase(it);
  return pager_api_->region_unpin(r->pager_region, offset, size);
}

nlohmann::json worker_memory::describe_models() const {
  auto out = nlohmann::json::array();
  for (const auto& [key, r] : regions_) {
    std::uint64_t resident = r->held;
    if (r->pager_region != nullptr) {
      pager_api_->region_resident_bytes(r->pager_region, &resident);
    }
    out.push_back({{"key", key}, {"size", r->size}, {"resident", resident}});
  }
  return out;
}

}  // namespace orch::worker
