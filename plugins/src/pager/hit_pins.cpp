#include "hit_pins.hpp"

#include <sched.h>

#include <mutex>

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

uint64_t take_hit_pin_covering(const page_slot* p) noexcept {
  // One taker at a time, whatever the device: steal_pending is a flag per slot, not a count.
  static std::mutex takers;
  const std::lock_guard lock(takers);
  unsigned count = 0;
  reader_slot* slots = reader_slots(&count);
  for (unsigned i = 0; i < count; ++i) {
    thread_hit_pins& t = slots[i].hit_pins;
    bool covered = false;
    for (const auto& record : t.records)
      covered = covered || covers(record.load(std::memory_order_acquire), p);
    if (!covered) continue;
    t.steal_pending.store(1);
    fence_readers();  // a section that begins after this sees the flag
    while (slots[i].active.load(std::memory_order_acquire) != 0) sched_yield();
    uint64_t taken = 0;
    for (auto& record : t.records) {
      const uint64_t r = record.load(std::memory_order_acquire);
      if (covers(r, p)) {
        record.store(0, std::memory_order_relaxed);
        taken = r;
        break;
      }
    }
    t.steal_pending.store(0, std::memory_order_release);
    if (taken != 0) return taken;
  }
  return 0;
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
