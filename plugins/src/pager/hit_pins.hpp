// Pins the hit path takes without writing the page (pager_fast_path.cpp).
//
// A pin in the page word is a locked read-modify-write, and a fault with its unpin costs two;
// with the lookups around them that was 1.9x two atomic increments, where ComfyUI pays it for
// every layer of every step. Instead, a thread records "I hold pages [first, first + n)" in a
// record of its own reader slot (reader_grace.hpp) with plain stores, and counts its hits in a
// counter of its own. Whoever takes a page away, always the locked side under the pager mutex,
// first looks through every thread's records (hit_pin_held) and leaves a held page alone.
//
// Why plain stores suffice (the ordering is reader_grace.hpp's asymmetric fence again):
//
// - Lowering a watermark (eviction) marks the region as lowering and then runs membarrier(2)
//   before it claims a page. A fault stores its record and only then reads the mark, the
//   watermark and the page's resident bit. A record stored before the barrier is seen by every
//   claim after it; a fault whose record came after it sees the mark and takes the locked path.
// - A claim of a page above the watermark (an unpin, a fault's clean-up) needs no barrier: a
//   fault that could hold such a page stored its record before the barrier of the lowering that
//   passed it, and any other fault sees the mark or the lowered watermark and backs out.
// - An unpin clears its record and then reads the mark and the watermark: a lowering that saw
//   the record and passed the page is either still marked (the unpin takes the locked path and
//   frees the page after it) or visible (the page is above the watermark: the same).
//
// Records are the owner's: only the thread that took a record writes it, with plain stores, and
// the hit path's unpin only clears an exact match of its own fault. Every other unpin (another
// range, another thread, a thread without a reader slot) goes to the locked path, which finds
// the words without a pin and the records that cover them, and takes such a record over
// (take_hit_pin_covering) into word pins. Taking a record from its owner is the writer's side of
// the fence once more: the taker raises the owner's steal_pending, fences, and waits until the
// owner is outside any reader section; a section that begins after the fence sees the flag and
// leaves its records alone. So an owner's plain clear and a taker never meet on one record.
//
// Without membarrier, or with every record in use, the hit path pins in the page word instead.
#pragma once

#include <atomic>
#include <cstdint>

namespace orch::plugin_detail {

struct page_slot;
class pager_device;

inline constexpr unsigned hit_pins_per_thread = 8;      // outstanding faults of one thread
inline constexpr unsigned hit_counters_per_thread = 2;  // devices one thread counts hits for
inline constexpr unsigned hit_pin_pages_shift = 48;
inline constexpr uint64_t hit_pin_max_pages = (uint64_t{1} << (64 - hit_pin_pages_shift)) - 1;

// A record: the address of the range's first page_slot in the low 48 bits (user addresses on
// x86-64 and aarch64), the number of pages above. 0 is a free record. A range that does not fit
// gets no record (0 here): the hit path then pins in the page words.
inline uint64_t encode_hit_pin(const page_slot* first, uint64_t pages) noexcept {
  const auto address = reinterpret_cast<uintptr_t>(first);
  if ((address >> hit_pin_pages_shift) != 0 || pages == 0 || pages > hit_pin_max_pages) return 0;
  return address | (pages << hit_pin_pages_shift);
}
inline const page_slot* hit_pin_first(uint64_t record) noexcept {
  return reinterpret_cast<const page_slot*>(record & ((uint64_t{1} << hit_pin_pages_shift) - 1));
}
inline uint64_t hit_pin_pages(uint64_t record) noexcept {
  return record >> hit_pin_pages_shift;
}

// A thread's hits and faults on one device, written by that thread only (load and store, no
// read-modify-write); stats() adds them up.
struct hit_counter {
  std::atomic<const pager_device*> device{nullptr};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> faults{0};
};

struct thread_hit_pins {
  std::atomic<uint64_t> records[hit_pins_per_thread]{};
  // Raised while the locked side takes one of these records over: the owner's hit path then
  // neither takes nor clears a record (take_hit_pin_covering).
  std::atomic<uint32_t> steal_pending{0};
  hit_counter counters[hit_counters_per_thread];
};

// The thread's side (the hit path), for its own slot.
inline std::atomic<uint64_t>* free_hit_pin(thread_hit_pins& t) noexcept {
  for (auto& record : t.records)
    if (record.load(std::memory_order_relaxed) == 0) return &record;
  return nullptr;
}
inline hit_counter* hit_counter_for(thread_hit_pins& t, const pager_device* d) noexcept {
  hit_counter* unused = nullptr;
  for (auto& c : t.counters) {
    const pager_device* owner = c.device.load(std::memory_order_acquire);
    if (owner == d) return &c;
    if (owner == nullptr && unused == nullptr) unused = &c;
  }
  if (unused != nullptr) unused->device.store(d, std::memory_order_relaxed);
  return unused;
}
inline void count_hit(hit_counter& c, uint64_t pages) noexcept {
  c.hits.store(c.hits.load(std::memory_order_relaxed) + pages, std::memory_order_relaxed);
  c.faults.store(c.faults.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// The locked side: every thread's slot.
//
// True when some thread's record covers page p.
bool hit_pin_held(const page_slot* p) noexcept;
// Every thread's records at one moment, for a read-out over many pages (pinned bytes, residency)
// under the pager mutex: one pass over the slots instead of one per page.
class hit_pin_snapshot {
 public:
  hit_pin_snapshot() noexcept;
  bool held(const page_slot* p) const noexcept;

 private:
  static constexpr unsigned capacity = 256;  // past it, held() asks the slots again
  uint64_t records_[capacity];
  unsigned count_ = 0;
  bool complete_ = true;
};
// Takes over one record, of any thread, that covers page p: the record is cleared and returned
// (0: none covers it), and the caller turns it into word pins. Under the pager mutex and outside
// any reader section (it waits for the owner's to end).
uint64_t take_hit_pin_covering(const page_slot* p) noexcept;
// Forgets every record inside [begin, end): a region being destroyed, after its readers.
void drop_hit_pins(const page_slot* begin, const page_slot* end) noexcept;
// Adds every thread's counts for d.
void add_hit_counts(const pager_device* d, uint64_t& hits, uint64_t& faults) noexcept;
// Forgets d's counters: a device being closed, after its readers.
void drop_hit_counters(const pager_device* d) noexcept;

}  // namespace orch::plugin_detail
