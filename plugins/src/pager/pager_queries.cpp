// Pager read-outs and settings (docs/references.md, aimdo §4.6, §4.9): residency, resident and
// pinned bytes, the budget deficit, polls, external accounting, usage, stats, the budget cap and
// the pressure source.
#include <algorithm>

#include "../common/struct_prefix.hpp"
#include "pager_device.hpp"

namespace orch::plugin_detail {

orch_status pager_device::residency(pager_region* r, uint8_t* flags, size_t cap, size_t* len) {
  device_lock lock(*this);
  if (len != nullptr) *len = r->nr_pages_;
  if (flags == nullptr || cap < r->nr_pages_) return ORCH_INVALID;
  const hit_pin_snapshot records;
  for (uint64_t i = 0; i < r->nr_pages_; ++i) {
    const uint64_t w = r->pages_[i].word.load(std::memory_order_relaxed);
    flags[i] = static_cast<uint8_t>(((w & page_word::resident) != 0 ? ORCH_PAGE_RESIDENT : 0u) |
                                    (pinned(r->pages_[i], records) ? ORCH_PAGE_PINNED : 0u));
  }
  return ORCH_OK;
}

orch_status pager_device::region_resident_bytes(pager_region* r, uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  device_lock lock(*this);
  *bytes = r->resident_ * options_.page_size;
  return ORCH_OK;
}

orch_status pager_device::resident_bytes(uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  device_lock lock(*this);
  *bytes = page_bytes_;
  return ORCH_OK;
}

orch_status pager_device::pinned_bytes(uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  device_lock lock(*this);
  uint64_t pinned = 0;
  const hit_pin_snapshot records;
  for (const pager_region* r : priority_) pinned += pinned_pages_locked(*r, records);
  *bytes = pinned * options_.page_size;
  return ORCH_OK;
}

orch_status pager_device::budget_deficit(uint64_t request, int64_t* deficit) {
  if (deficit == nullptr) return ORCH_INVALID;
  device_lock lock(*this);
  *deficit = deficit_locked(request);
  return ORCH_OK;
}

orch_status pager_device::poll() {
  device_lock lock(*this);
  if (options_.pressure_source == ORCH_PRESSURE_NONE) return ORCH_OK;
  const uint64_t before = stats_.polls;
  poll_locked(true);
  return stats_.polls > before ? ORCH_OK : ORCH_DEVICE_ERROR;
}

orch_status pager_device::account_external(int64_t delta) {
  device_lock lock(*this);
  if (external_bytes_ + delta < 0) return ORCH_INVALID;
  external_bytes_ += delta;
  publish_gate_locked();
  return ORCH_OK;
}

orch_status pager_device::usage(orch_pager_usage* out) {
  if (out == nullptr || !ORCH_HAS_FIELD(out, last_polled_free)) return ORCH_INVALID;
  device_lock lock(*this);
  out->capacity = static_cast<uint64_t>(capacity_locked());
  out->page_bytes = page_bytes_;
  out->external_bytes = static_cast<uint64_t>(external_bytes_);
  out->last_polled_free = last_free_;
  return ORCH_OK;
}

orch_status pager_device::stats(orch_pager_stats* out) {
  if (out == nullptr || !ORCH_HAS_FIELD(out, errors)) return ORCH_INVALID;
  device_lock lock(*this);
  orch_pager_stats s = stats_;
  // Plus what the hit path counted in its threads' counters (hit_pins.hpp), and in the page
  // words and has not been folded yet.
  add_hit_counts(this, s.hits, s.faults);
  for (const pager_region* r : priority_)
    for (uint64_t i = 0; i < r->nr_pages_; ++i) {
      const uint64_t w = r->pages_[i].word.load(std::memory_order_relaxed);
      s.hits += page_word::hits(w);
      s.faults += page_word::faults(w);
    }
  write_prefix(out, s);
  return ORCH_OK;
}

orch_status pager_device::set_budget_cap(uint64_t bytes) {
  device_lock lock(*this);
  options_.budget_cap = bytes;
  publish_gate_locked();
  return ORCH_OK;
}

orch_status pager_device::set_pressure_source(uint32_t source) {
  if (source > ORCH_PRESSURE_NONE) return ORCH_INVALID;
  device_lock lock(*this);
  options_.pressure_source = source;
  polled_ = false;
  publish_gate_locked();
  return ORCH_OK;
}

}  // namespace orch::plugin_detail
