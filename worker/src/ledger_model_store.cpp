// The ledger's model store (model_store.hpp): a ledger model per model, loaded whole on the
// backend device when the device has it free plus ComfyUI's reserve, and unloaded whole in
// ComfyUI's order. The ledger keeps accounts only; the device memory follows its figures here.
#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

#include "model_store.hpp"
#include "orch/plugins/errc.hpp"
#include "orch/plugins/names.hpp"
#include "orch/plugins/status_error.hpp"

namespace orch::worker {
namespace {

// Byte sums that cannot wrap: a model size plus the reserve, a free reading plus a request.
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

class ledger_model_store final : public model_store {
 public:
  ledger_model_store(const orch_ledger_api& api, orch_ledger* ledger, std::uint64_t budget,
                     plugins::backend_device& backend, std::uint64_t reserve_vram)
      : api_(api), ledger_(ledger), budget_(budget), backend_(backend), reserve_(reserve_vram) {}
  ~ledger_model_store() override {
    for (auto& [key, r] : regions_) {
      if (r->held > 0) backend_.api().phys_release(backend_.device(), r->handle);
    }
    regions_.clear();
    api_.close(ledger_);
  }

  orch_status fault(model_region& r, std::uint64_t, std::uint64_t) override {
    if (r.held >= r.size) return ORCH_OK;
    return load(r).ok() ? ORCH_OK : ORCH_OOM_RETRYABLE;
  }

  // A whole model stays loaded: there is nothing to unpin.
  orch_status unpin(model_region&, std::uint64_t, std::uint64_t) override { return ORCH_OK; }

  void unload_all() noexcept override {
    for (auto& [key, r] : regions_) {
      std::uint64_t freed = 0;
      api_.model_unload(r->ledger_model, &freed);
    }
    sync_device_memory();
  }

  void evict(std::uint64_t bytes) noexcept override {
    // Whole models in ComfyUI's order until `bytes` more are free in the ledger's budget.
    orch_ledger_stats st{};
    st.struct_size = sizeof(st);
    if (api_.stats(ledger_, &st) != ORCH_OK) return;
    // free_memory(n) makes n bytes free in the budget: ask for what is free now plus `bytes`.
    const std::uint64_t free_now = budget_ > st.loaded_bytes ? budget_ - st.loaded_bytes : 0;
    const std::uint64_t target = std::min(budget_, saturating_add(free_now, bytes));
    std::uint64_t freed = 0;
    api_.free_memory(ledger_, target, &freed);
    sync_device_memory();
  }

  std::uint64_t resident_bytes() const noexcept override {
    std::uint64_t held = 0;
    for (const auto& [key, r] : regions_) held += r->held;
    return held;
  }

  void publish(ipc::stats_snapshot& s) const noexcept override {
    std::uint64_t free_bytes = 0, total = 0;
    if (backend_.api().mem_get_info(backend_.device(), &free_bytes, &total) == ORCH_OK) {
      s.device_total_bytes = total;
      s.device_free_bytes = free_bytes;
    }
    s.ledger_loaded_bytes = resident_bytes();
  }

 protected:
  result<model_region*> create(const std::string& key, std::uint64_t bytes) override {
    auto r = std::make_unique<model_region>();
    r->key = key;
    r->size = bytes;
    const orch_status st = api_.model_add(ledger_, bytes, &r->ledger_model);
    if (st != ORCH_OK) return plugins::status_error(st, "the ledger's model_add");
    // Listed before it loads: the device memory follows the ledger for every listed model.
    model_region& added = *regions_.emplace(key, std::move(r)).first->second;
    if (auto loaded = load(added); !loaded) {
      api_.model_remove(added.ledger_model);
      if (added.held > 0) backend_.api().phys_release(backend_.device(), added.handle);
      regions_.erase(key);
      return loaded.err();
    }
    return &added;
  }

  std::uint64_t resident_bytes(const model_region& r) const noexcept override { return r.held; }

 private:
  status load(model_region& r);
  orch_status sync_device_memory() noexcept;

  const orch_ledger_api& api_;
  orch_ledger* ledger_;
  std::uint64_t budget_;
  plugins::backend_device& backend_;
  std::uint64_t reserve_;
};

status ledger_model_store::load(model_region& r) {
  // ComfyUI loads a whole model only when the device has it free plus the reserve
  // (free_memory(memory_required + extra_reserved_memory)); other processes' memory counts.
  // This worker's own older models go first, in ComfyUI's order; only then is the host asked.
  const std::uint64_t needed = saturating_add(r.size, reserve_);
  std::uint64_t free_bytes = 0, total = 0;
  if (backend_.api().mem_get_info(backend_.device(), &free_bytes, &total) == ORCH_OK &&
      free_bytes < needed) {
    evict(needed - free_bytes);
    if (backend_.api().mem_get_info(backend_.device(), &free_bytes, &total) == ORCH_OK &&
        free_bytes < needed) {
      last_required_ = needed;
      return error{plugins::plugin_errc::out_of_memory,
                   "the device has " + std::to_string(free_bytes) + " bytes free; the model " +
                       r.key + " needs " + std::to_string(needed) + " with the reserve"};
    }
  }
  std::uint64_t loaded = 0;
  const orch_status st = api_.model_load(r.ledger_model, 0.0, &loaded);
  if (st != ORCH_OK && st != ORCH_OOM_RETRYABLE) {
    return plugins::status_error(st, "the ledger's model_load");
  }
  const orch_status created = sync_device_memory();
  if (r.held >= r.size) return ok_status();
  // The device did not give the memory: the model is unloaded again. Only an out-of-memory
  // answer tells the host how much is needed (it may evict through its stand-ins and retry).
  std::uint64_t freed = 0;
  api_.model_unload(r.ledger_model, &freed);
  sync_device_memory();
  if (created != ORCH_OOM_RETRYABLE && created != ORCH_OK) {
    return plugins::status_error(created, "allocating the model " + r.key + " on the device");
  }
  last_required_ = needed;
  return error{plugins::plugin_errc::out_of_memory, "the device cannot hold the model " + r.key +
                                                        " (" + std::to_string(r.size) + " bytes)"};
}

orch_status ledger_model_store::sync_device_memory() noexcept {
  // Releases first, so a model evicted to make room gives its bytes back before the new one
  // takes them.
  std::uint64_t granularity = 1;
  if (backend_.api().granularity(backend_.device(), &granularity) != ORCH_OK || granularity == 0) {
    granularity = 1;
  }
  orch_status result = ORCH_OK;
  std::vector<model_region*> grow;
  try {
    grow.reserve(regions_.size());
  } catch (...) {
    return ORCH_HOST_OOM;
  }
  for (auto& [key, r] : regions_) {
    orch_ledger_model_info info{};
    info.struct_size = sizeof(info);
    if (api_.model_info(r->ledger_model, &info) != ORCH_OK) continue;
    if (info.loaded == r->held) continue;
    if (r->held > 0) {
      backend_.api().phys_release(backend_.device(), r->handle);
      r->held = 0;
    }
    if (info.loaded > 0) grow.push_back(r.get());
  }
  for (model_region* r : grow) {
    orch_ledger_model_info info{};
    info.struct_size = sizeof(info);
    if (api_.model_info(r->ledger_model, &info) != ORCH_OK) continue;
    const std::uint64_t units = info.loaded / granularity + (info.loaded % granularity ? 1 : 0);
    const std::uint64_t rounded =
        units > UINT64_MAX / granularity ? UINT64_MAX : units * granularity;
    const orch_status st = backend_.api().phys_create(backend_.device(), rounded, &r->handle);
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

}  // namespace

std::unique_ptr<model_store> make_ledger_store(const orch_ledger_api& api, orch_ledger* ledger,
                                               std::uint64_t budget,
                                               plugins::backend_device& backend,
                                               std::uint64_t reserve_vram) {
  return std::make_unique<ledger_model_store>(api, ledger, budget, backend, reserve_vram);
}

}  // namespace orch::worker
