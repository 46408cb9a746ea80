#include "hit_pins.hpp"

#include "pager_device.hpp"
#include "reader_grace.hpp"

namespace orch::plugin_detail {

namespace {

template <typename F>
void for_each_slot(F&& f) noexcept {
  unsigned count = 0;
  reader_slot* slots = reader_slots(&count);
  for (unsigned i = 0; i < count; ++i) f(slots[i].hit_pins);
}

bool covers(uint64_t record, const page_slot* p) noexcept {
  const page_slot* first = hit_pin_first(record);
  return record != 0 && p >= first && p < first + hit_pin_pages(record);
}

}  // namespace

bool hit_pin_held(const page_slot* p) noexcept {
  bool held = false;
  for_each_slot([&](thread_hit_pins& t) {
    for (const auto& record : t.records)
      if (covers(record.load(std::memory_order_acquire), p)) held = true;
  });
  return held;
}

hit_pin_snapshot::hit_pin_snapshot() noexcept {
  for_each_slot([&](thread_hit_pins& t) {
    for (const auto& record : t.records)
      if (const uint64_t r = record.load(std::memory_order_acquire); r != 0) {
        if (count_ < capacity)
          records_[count_++] = r;
        else
          complete_ = false;
      }
  });
}

bool hit_pin_snapshot::held(const page_slot* p) const noexcept {
  if (!complete_) return hit_pin_held(p);
  for (unsigned i = 0; i < count_; ++i)
    if (covers(records_[i], p)) return true;
  return false;
}

bool take_foreign_hit_pin(uint64_t record, const thread_hit_pins& own) noexcept {
  bool taken = false;
  for_each_slot([&](thread_hit_pins& t) {
    if (taken || &t == &own) return;
    for (auto& r : t.records) {
      uint64_t expected = record;
      if (r.compare_exchange_strong(expected, 0)) {
        taken = true;
        return;
      }
    }
  });
  return taken;
}

void drop_hit_pins(const page_slot* begin, const page_slot* end) noexcept {
  for_each_slot([&](thread_hit_pins& t) {
    for (auto& r : t.records) {
      uint64_t record = r.load(std::memory_order_acquire);
      const page_slot* first = hit_pin_first(record);
      if (record != 0 && first >= begin && first < end) r.compare_exchange_strong(record, 0);
    }
  });
}

void add_hit_counts(const pager_device* d, uint64_t& hits, uint64_t& faults) noexcept {
  for_each_slot([&](thread_hit_pins& t) {
    for (const auto& c : t.counters)
      if (c.device.load(std::memory_order_acquire) == d) {
        hits += c.hits.load(std::memory_order_relaxed);
        faults += c.faults.load(std::memory_order_relaxed);
      }
  });
}

void drop_hit_counters(const pager_device* d) noexcept {
  for_each_slot([&](thread_hit_pins& t) {
    for (auto& c : t.counters)
      if (c.device.load(std::memory_order_relaxed) == d) {
        c.hits.store(0, std::memory_order_relaxed);
        c.faults.store(0, std::memory_order_relaxed);
        c.device.store(nullptr, std::memory_order_release);  // the zeros first (hit_counter_for)
      }
  });
}

}  // namespace orch::plugin_detail
