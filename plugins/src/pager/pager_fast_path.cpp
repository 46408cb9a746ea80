// The lock-free hit path: region_fault and region_unpin of resident pages below the watermark,
// that ComfyUI runs for each layer of each step (docs/references.md, aimdo §4.10). It takes neither
// the handle registry nor the pager mutex. Where membarrier(2) is available, a hit pins with a
// record in the thread's own slot (hit_pins.hpp) and writes nothing shared; otherwise, or with
// every record in use, it pins with one compare-and-swap per page word, and unpins with another.
// Anything else goes to the locked path, unchanged.
//
// The word protocol, and why each piece is needed (the records' own is in hit_pins.hpp):
//
// - Lifetime. The plugin looked the region up in its table inside a reader section
//   (reader_grace.hpp). region_destroy, device_close and shutdown unpublish a region first and
//   then wait for every reader section before they free anything, so `r`, its page words and its
//   device stay valid for the whole of this file's work, whatever another thread does.
//
// - The page word (page_word in pager_device.hpp) holds the resident bit and the pin count, and
//   every change to either is an atomic RMW on it, under the mutex or not. A pin succeeds only on
//   a word with the resident bit set. The locked side takes a page away from the hit path by
//   replacing a resident, unpinned word with 0 in one CAS (claim_unpinned) before it releases the
//   page. The two RMWs are totally ordered on the word, so either the pin came first (the claim
//   sees a pin and leaves the page) or the claim did (the pin sees no resident bit and backs
//   out). A pinned page is therefore never released, except by region_destroy, which aimdo also
//   does and which the caller has then raced with its own use.
//
// - Serial and handle of a page are written only while its word is 0 and are published by the
//   release store that sets the resident bit; a successful pin (acquire) sees them, and they
//   cannot change again before that pin is dropped.
//
// - The watermark. The fault checks end <= watermark before it pins. Eviction stores a lowered
//   watermark and then tries to claim the page. If a pin lands between the two, the fault is
//   ordered before the eviction: the page stays, pinned, above the watermark, exactly what a
//   locked fault followed by the eviction leaves. Such a page must be freed by the unpin that
//   drops its last pin. That unpin decrements (RMW on the word) and then loads the watermark;
//   the eviction stored the watermark and then read the word. With all four seq_cst this is the
//   store-buffering pattern that seq_cst forbids to go wrong both ways: if the eviction saw the
//   pin, the unpin sees the lowered watermark and sends the page to the locked path
//   (release_above_watermark). On x86 the RMWs are locked instructions and the loads plain ones.
//
// - The stopgap `free(deficit(0))` that starts every fault (§4.2) is a no-op when the process-wide
//   simple headroom is at most the device's published limit and no poll is due; otherwise the
//   locked path runs it. The clock is read as the locked path reads it, so sim's injected clock
//   reaches the hit path too.
//
// - Stats: a word hit adds to counters inside the same page word (no extra atomic), a recorded
//   one to its thread's counter. The locked side folds them into the device's stats.
#include <algorithm>

#include "pager_device.hpp"
#include "reader_grace.hpp"

namespace orch::plugin_detail {

namespace {

// The pages [first, end) a non-empty byte range touches (offset + size must not wrap). Page sizes
// are powers of two in practice (2 MiB granules, aimdo's 32 MiB): shifts then, by the device's
// page_shift_ worked out once, since the two 64-bit divisions otherwise took a third of the hit
// path's time (perf, bench_plugins).
struct page_span {
  uint64_t first;
  uint64_t end;
};
page_span pages_of(uint64_t offset, uint64_t size, uint64_t page, int shift) noexcept {
  const uint64_t last = offset + size - 1;
  if (shift >= 0) return {offset >> shift, (last >> shift) + 1};
  return {offset / page, last / page + 1};
}

// The hit path leaves a word with many pins, or a counter at its limit, to the locked path (which
// folds the counters); half the pin range stays for the locked path's own pins.
constexpr uint64_t fast_pin_limit = page_word::pin_max / 2;

}  // namespace

[[gnu::always_inline]] inline pager_device::recorded pager_device::fault_recorded(
    thread_hit_pins& pins, pager_region& r, uint64_t first, uint64_t end) noexcept {
  if (!readers_fenced_by_writer() || pins.steal_pending.load(std::memory_order_relaxed) != 0)
    return recorded::no_record;
  const uint64_t record = encode_hit_pin(&r.pages_[first], end - first);
  std::atomic<uint64_t>* slot = record != 0 ? free_hit_pin(pins) : nullptr;
  hit_counter* counter = slot != nullptr ? hit_counter_for(pins, this) : nullptr;
  if (counter == nullptr) return recorded::no_record;
  slot->store(record, std::memory_order_relaxed);
  // The record before the checks: only the compiler needs telling (hit_pins.hpp).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  bool held = r.lowering_.load(std::memory_order_acquire) == 0 &&
              end <= r.watermark_.load(std::memory_order_relaxed);
  for (uint64_t i = first; held && i < end; ++i)
    held = (r.pages_[i].word.load(std::memory_order_acquire) & page_word::resident) != 0;
  if (!held) {
    slot->store(0, std::memory_order_release);
    return recorded::refused;
  }
  count_hit(*counter, end - first);
  return recorded::pinned;
}

[[gnu::always_inline]] inline bool pager_device::unpin_recorded(thread_hit_pins& pins,
                                                                pager_region& r, uint64_t first,
                                                                uint64_t end,
                                                                unpin_result& result) noexcept {
  const uint64_t record = encode_hit_pin(&r.pages_[first], end - first);
  if (record == 0 || pins.steal_pending.load(std::memory_order_relaxed) != 0) return false;
  for (auto& slot : pins.records)
    if (slot.load(std::memory_order_relaxed) == record) {
      slot.store(0, std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the clear before the checks
      result = r.lowering_.load(std::memory_order_acquire) != 0 ||
                       end > r.watermark_.load(std::memory_order_relaxed)
                   ? unpin_result::release_above_watermark
                   : unpin_result::done;
      return true;
    }
  return false;
}

bool pager_device::fault_hit(thread_hit_pins& pins, pager_region& r, uint64_t offset, uint64_t size,
                             uint64_t* sig, size_t sig_cap, size_t* sig_len,
                             uint64_t* newly_mapped) noexcept {
  if (size == 0 || offset + size < offset) return false;
  const auto [first, end] = pages_of(offset, size, options_.page_size, page_shift_);
  if (sig != nullptr && sig_cap < end - first) return false;
  // The stopgap would free nothing: no poll due, and deficit(0) <= 0 for the current headroom.
  const int64_t headroom = static_cast<int64_t>(
      std::min<uint64_t>(simple_headroom().load(std::memory_order_relaxed), INT64_MAX));
  if (headroom > fast_headroom_limit_.load(std::memory_order_acquire)) return false;
  if (poll_interval_ns_.load(std::memory_order_relaxed) != UINT64_MAX &&
      fast_now_ns() - poll_last_ns_.load(std::memory_order_relaxed) >=
          poll_interval_ns_.load(std::memory_order_relaxed))
    return false;
  if (end > r.watermark_.load()) return false;  // seq_cst: see the protocol above
  switch (fault_recorded(pins, r, first, end)) {
    case recorded::pinned:
      if (sig != nullptr)
        for (uint64_t j = first; j < end; ++j) sig[j - first] = r.pages_[j].serial;
      if (sig_len != nullptr) *sig_len = end - first;
      if (newly_mapped != nullptr) *newly_mapped = 0;
      return true;
    case recorded::refused:
      return false;
    case recorded::no_record:
      break;
  }
  uint64_t i = first;
  for (; i < end; ++i) {
    std::atomic<uint64_t>& word = r.pages_[i].word;
    const uint64_t count = page_word::hit_one + (i == first ? page_word::fault_one : 0);
    uint64_t w = word.load(std::memory_order_relaxed);
    bool pinned = false;
    while ((w & page_word::resident) != 0 && page_word::pins(w) < fast_pin_limit &&
           page_word::hits(w) < page_word::hit_max &&
           (i != first || page_word::faults(w) < page_word::fault_max)) {
      if (word.compare_exchange_weak(w, w + page_word::pin_one + count)) {
        pinned = true;
        break;
      }
    }
    if (!pinned) break;
  }
  if (i < end) {
    // A page is absent, or a counter is full: take back what this call added and let the locked
    // fault do it all. A page this leaves unpinned above a watermark an eviction lowered
    // meanwhile is freed by the locked fault's release_above_watermark_locked.
    // The counters come back out only where they are still in the word: the locked side may
    // have folded them into the stats meanwhile (then this call's hit stays counted).
    for (uint64_t j = first; j < i; ++j) {
      std::atomic<uint64_t>& word = r.pages_[j].word;
      uint64_t w = word.load(std::memory_order_relaxed);
      for (;;) {
        uint64_t back = page_word::pin_one;
        if (page_word::hits(w) != 0) back += page_word::hit_one;
        if (j == first && page_word::faults(w) != 0) back += page_word::fault_one;
        if (word.compare_exchange_weak(w, w - back)) break;
      }
    }
    return false;
  }
  if (sig != nullptr)
    for (uint64_t j = first; j < end; ++j) sig[j - first] = r.pages_[j].serial;
  if (sig_len != nullptr) *sig_len = end - first;
  if (newly_mapped != nullptr) *newly_mapped = 0;
  return true;
}

pager_device::unpin_result pager_device::unpin_hit(thread_hit_pins& pins, pager_region& r,
                                                   uint64_t offset, uint64_t size) noexcept {
  if (size == 0 || offset + size < offset) return unpin_result::locked;
  const auto span = pages_of(offset, size, options_.page_size, page_shift_);
  const uint64_t first = span.first;
  const uint64_t end = std::min(span.end, r.nr_pages_);
  if (first >= end) return unpin_result::locked;
  if (unpin_result result{}; unpin_recorded(pins, r, first, end, result)) return result;
  // A range reaching above the watermark syncs before and after (§4.3): the locked path's job.
  if (end > r.watermark_.load()) return unpin_result::locked;
  // A page with no pin in its word may be held by a record (another range's, another thread's):
  // the locked unpin finds it (take_hit_pin_covering).
  for (uint64_t i = first; i < end; ++i)
    if (page_word::pins(r.pages_[i].word.load(std::memory_order_relaxed)) == 0)
      return unpin_result::locked;
  bool release = false;
  for (uint64_t i = first; i < end; ++i) {
    std::atomic<uint64_t>& word = r.pages_[i].word;
    uint64_t w = word.load(std::memory_order_relaxed);
    // Saturating at 0, as aimdo.
    while (page_word::pins(w) != 0 && !word.compare_exchange_weak(w, w - page_word::pin_one)) {
    }
    // The last pin of a page that an eviction passed while it was pinned: free it now.
    if (page_word::pins(w) == 1 && (w & page_word::resident) != 0 && i >= r.watermark_.load())
      release = true;
  }
  return release ? unpin_result::release_above_watermark : unpin_result::done;
}

}  // namespace orch::plugin_detail
