#include "ledger_policy.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <tuple>

#include "../common/struct_prefix.hpp"

namespace orch::plugin_detail {

ledger::~ledger() {
  for (ledger_entry* m : models_) delete m;
}

uint64_t ledger::loaded_total_locked() const noexcept {
  uint64_t total = 0;
  for (const ledger_entry* m : loaded_) total += m->loaded;
  return total;
}

uint64_t ledger::unload_locked(ledger_entry* m) noexcept {
  const uint64_t freed = m->loaded;
  m->loaded = 0;
  loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), m), loaded_.end());
  if (freed > 0 && host_ != nullptr) host_->report_release(ORCH_RELEASE_TARGETED, 0, freed);
  return freed;
}

// free_memory's loop: until `bytes` are free, unload the first model by ComfyUI's key
// (-offloaded, refcount, size, list index), ascending. The most offloaded model goes first, since
// finishing its eviction is the cheapest way to the next byte; index 0 being the latest load makes
// the last tiebreak anti-LRU. Free memory is recomputed every round: a feedback loop, not a plan.
uint64_t ledger::free_locked(uint64_t bytes, const ledger_entry* keep) noexcept {
  uint64_t freed = 0;
  for (;;) {
    const uint64_t used = loaded_total_locked();
    const uint64_t free = used < budget_ ? budget_ - used : 0;
    if (free >= bytes) break;
    ledger_entry* victim = nullptr;
    std::tuple<int64_t, uint32_t, uint64_t, size_t> best{};
    for (size_t i = 0; i < loaded_.size(); ++i) {
      ledger_entry* m = loaded_[i];
      if (m == keep || m->loaded == 0) continue;
      const std::tuple<int64_t, uint32_t, uint64_t, size_t> key{
          -static_cast<int64_t>(m->size - m->loaded), m->refcount, m->size, i};
      if (victim == nullptr || key < best) {
        victim = m;
        best = key;
      }
    }
    if (victim == nullptr) break;
    const uint64_t got = unload_locked(victim);
    freed += got;
    ++stats_.evictions;
    stats_.evicted_bytes += got;
  }
  return freed;
}

orch_status ledger::set_budget(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  budget_ = bytes;
  return ORCH_OK;
}

orch_status ledger::add(uint64_t size, ledger_entry** out) {
  if (out == nullptr || size == 0) return ORCH_INVALID;
  auto* m = new (std::nothrow) ledger_entry;
  if (m == nullptr) return ORCH_HOST_OOM;
  m->owner = this;
  m->size = size;
  std::lock_guard lock(mutex_);
  try {
    models_.push_back(m);
  } catch (...) {
    delete m;
    throw;
  }
  *out = m;
  return ORCH_OK;
}

void ledger::remove(ledger_entry* m) noexcept {
  std::lock_guard lock(mutex_);
  unload_locked(m);
  models_.erase(std::remove(models_.begin(), models_.end(), m), models_.end());
  delete m;
}

orch_status ledger::set_refcount(ledger_entry* m, uint32_t refcount) {
  std::lock_guard lock(mutex_);
  m->refcount = refcount;
  return ORCH_OK;
}

orch_status ledger::load(ledger_entry* m, double model_budget, uint64_t* loaded) {
  if (!(model_budget >= 0.0) || std::isinf(model_budget)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  // The only allocation of a load, made before anything changes: a throw here leaves the ledger
  // as it was (the insert below then cannot reallocate).
  loaded_.reserve(loaded_.size() + 1);
  // The seed's magic values, kept as a double: 0 means everything (rewritten to 1e32 upstream);
  // 0.1 (anything below one byte) means essentially nothing. A budget at or above the size is
  // compared as a double, never cast: casting a double beyond 2^64 (1e32) is undefined.
  const uint64_t target =
      model_budget == 0.0 || model_budget >= static_cast<double>(m->size)
          ? m->size
          : static_cast<uint64_t>(std::floor(model_budget));
  if (target < m->loaded) {
    // A smaller budget than what is loaded: partially unload down to it.
    const uint64_t drop = m->loaded - target;
    m->loaded = target;
    if (host_ != nullptr) host_->report_release(ORCH_RELEASE_TARGETED, 0, drop);
  } else if (target > m->loaded) {
    free_locked(target - m->loaded, m);
    const uint64_t used = loaded_total_locked();
    const uint64_t free = used < budget_ ? budget_ - used : 0;
    m->loaded += std::min(target - m->loaded, free);  // what still does not fit stays offloaded
  }
  loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), m), loaded_.end());
  loaded_.insert(loaded_.begin(), m);  // current_loaded_models.insert(0, ...)
  ++stats_.loads;
  if (loaded != nullptr) *loaded = m->loaded;
  return ORCH_OK;
}

orch_status ledger::unload(ledger_entry* m, uint64_t* freed) {
  std::lock_guard lock(mutex_);
  const uint64_t got = unload_locked(m);
  if (freed != nullptr) *freed = got;
  return ORCH_OK;
}

orch_status ledger::info(ledger_entry* m, orch_ledger_model_info* out) {
  if (out == nullptr || !ORCH_HAS_FIELD(out, position)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  out->refcount = m->refcount;
  out->size = m->size;
  out->loaded = m->loaded;
  out->offloaded = m->size - m->loaded;
  const auto it = std::find(loaded_.begin(), loaded_.end(), m);
  out->position = it == loaded_.end() ? -1 : static_cast<int64_t>(it - loaded_.begin());
  return ORCH_OK;
}

orch_status ledger::free_memory(uint64_t bytes, uint64_t* freed) {
  std::lock_guard lock(mutex_);
  const uint64_t got = free_locked(bytes, nullptr);
  if (freed != nullptr) *freed = got;
  const uint64_t used = loaded_total_locked();
  return used + bytes <= budget_ ? ORCH_OK : ORCH_OOM_RETRYABLE;
}

orch_status ledger::stats(orch_ledger_stats* out) {
  if (out == nullptr || !ORCH_HAS_FIELD(out, loaded_bytes)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  orch_ledger_stats s = stats_;
  s.loaded_bytes = loaded_total_locked();
  write_prefix(out, s);
  return ORCH_OK;
}

}  // namespace orch::plugin_detail
