// The backend-agnostic pager policy (docs/references.md, aimdo §4 and §6.3): regions, fault, unpin,
// watermark eviction, headrooms and polled pressure. It drives any orch_backend_api, so the sim,
// cuda and hip pager plugins share it unchanged (aimdo's g_cuda + src/ split, §6.1).
//
// Thread safety: one mutex per device guards all of its state (aimdo added a per-device lock
// later, §2.4). reclaim() may be asked to try-lock so an allocation path never waits behind a
// model thread (§4.8). The one exception is the hit path (pager_fast_path.cpp): a fault or an
// unpin of resident pages below the watermark takes no lock and, with hit_pins.hpp's records, no
// atomic read-modify-write either; the protocol that keeps that safe is written in those two.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>

#include "../common/host_link.hpp"
#include "hit_pins.hpp"
#include "orch/plugin/backend.h"
#include "orch/plugin/pager.h"

namespace orch::plugin_detail {

inline constexpr uint64_t default_page_size = 32ull << 20;        // aimdo's VBAR page (§2.3)
inline constexpr uint64_t default_headroom = 256ull << 20;        // VRAM_HEADROOM (§2.3)
inline constexpr uint64_t default_poll_interval_ns = 2000000000;  // 2000 ms (§4.6)

// Process-wide simple headroom (aimdo's simple_vram_headroom is one process-wide int64_t, §4.1).
// Inline (a constant-initialised variable, no guard), as the hit path reads it on every fault.
inline std::atomic<uint64_t> g_simple_headroom{default_headroom};
inline std::atomic<uint64_t>& simple_headroom() noexcept {
  return g_simple_headroom;
}

// ceil(a / b) without forming a + b - 1, which wraps for requests near UINT64_MAX ("evict
// everything" is a natural host request).
inline uint64_t ceil_div(uint64_t a, uint64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// A byte request as a signed amount. The deficit arithmetic adds it to usage and headroom, so
// it is clamped far below INT64_MAX: 2^61 bytes is still more than any device holds.
inline constexpr uint64_t max_signed_request = uint64_t{1} << 61;
inline int64_t signed_request(uint64_t bytes) {
  return static_cast<int64_t>(std::min(bytes, max_signed_request));
}

struct pager_options {
  int32_t ordinal = 0;
  uint32_t level = ORCH_LEVEL_4;
  uint64_t page_size = default_page_size;
  uint64_t extra_headroom = 0;
  uint64_t budget_cap = 0;
  uint64_t poll_interval_ns = default_poll_interval_ns;
  int64_t poll_floor = static_cast<int64_t>(default_headroom);
  uint32_t pressure_source = ORCH_PRESSURE_DEFAULT;
};

class pager_device;

// A page's state word: everything the lock-free hit path reads and changes, so a pin or an unpin
// is one compare-and-swap. Counters of fast-path hits and faults ride in the same word (an extra
// atomic per call would cost as much as the pin itself); they are folded into the device's stats
// under the mutex when the page is freed, when they near their limit, and when stats are read.
namespace page_word {
inline constexpr uint64_t resident = uint64_t{1} << 63;
inline constexpr uint64_t pin_one = 1;
inline constexpr uint64_t pin_max = (uint64_t{1} << 24) - 1;
inline constexpr unsigned hit_shift = 24;
inline constexpr uint64_t hit_one = uint64_t{1} << hit_shift;
inline constexpr uint64_t hit_max = (uint64_t{1} << 20) - 1;
inline constexpr unsigned fault_shift = 44;
inline constexpr uint64_t fault_one = uint64_t{1} << fault_shift;
inline constexpr uint64_t fault_max = (uint64_t{1} << 19) - 1;
constexpr uint64_t pins(uint64_t w) {
  return w & pin_max;
}
constexpr uint64_t hits(uint64_t w) {
  return (w >> hit_shift) & hit_max;
}
constexpr uint64_t faults(uint64_t w) {
  return (w >> fault_shift) & fault_max;
}
}  // namespace page_word

struct page_slot {
  std::atomic<uint64_t> word{0};  // page_word: resident bit, pins, fast-path counters
  uint64_t handle = 0;            // backend handle; under the mutex only
  uint64_t serial = 0;  // written only while the page is absent (under the mutex); read by pinners
};

// Takes a resident, unpinned page away from the hit path: its word goes to 0 in one CAS, so a
// concurrent pin either came first (the page stays) or fails (and takes the locked path).
// Returns the word it replaced, or 0 when the page is absent or pinned.
inline uint64_t claim_unpinned(page_slot& p) noexcept {
  uint64_t w = p.word.load();
  while ((w & page_word::resident) != 0 && page_word::pins(w) == 0)
    if (p.word.compare_exchange_weak(w, 0)) return w;
  return 0;
}

class pager_region {
 public:
  pager_device& owner() const noexcept { return *owner_; }
  // The handle the plugin gave out for this region (region_table.hpp); 0 until published.
  uint64_t handle() const noexcept { return handle_; }
  void set_handle(uint64_t handle) noexcept { handle_ = handle; }

 private:
  friend class pager_device;
  pager_device* owner_ = nullptr;
  uint64_t handle_ = 0;
  uint64_t base_ = 0;
  uint64_t nr_pages_ = 0;
  // Pages [watermark, nr_pages) may not be faulted. Written under the mutex, read by the hit path
  // without it (seq_cst on both sides: see pager_fast_path.cpp).
  std::atomic<uint64_t> watermark_{0};
  // Set while a lowering of this watermark holds the mutex (hit_pins.hpp): a hit path that sees
  // it takes the locked path.
  std::atomic<uint32_t> lowering_{0};
  uint64_t limit_ = 0;  // eviction never lowers the watermark below this
  uint64_t resident_ = 0;
  std::unique_ptr<page_slot[]> pages_;
  std::list<pager_region*>::iterator position_;
};

class pager_device {
 public:
  // Opens the backend device and builds a pager over it. *out owns both.
  static orch_status open(const orch_backend_api* backend, const orch_device_config& device,
                          const pager_options& options, const host_link* host, pager_device** out);
  ~pager_device();  // destroys every region (pinned pages too) and closes the device

  pager_device(const pager_device&) = delete;
  pager_device& operator=(const pager_device&) = delete;

  uint32_t level() const noexcept { return options_.level; }
  const orch_backend_api* backend() const noexcept { return backend_; }
  orch_device* device() const noexcept { return device_; }

  orch_status set_budget_cap(uint64_t bytes);
  orch_status set_pressure_source(uint32_t source);

  orch_status create_region(uint64_t bytes, pager_region** out, uint64_t* clamped);
  void destroy_region(pager_region* r) noexcept;
  // Unpublishes every region's handle (region_table.hpp), before the device is deleted.
  void unpublish_regions() noexcept;
  orch_status region_info(pager_region* r, orch_region_info* info);
  orch_status prioritize(pager_region* r, bool to_top);

  orch_status fault(pager_region* r, uint64_t offset, uint64_t size, uint64_t* sig, size_t sig_cap,
                    size_t* sig_len, uint64_t* newly_mapped);
  orch_status unpin(pager_region* r, uint64_t offset, uint64_t size);

  // The lock-free hit path (pager_fast_path.cpp). The caller keeps `r` alive (a reader section,
  // reader_grace.hpp). fault_hit answers true when it has done the whole fault (ORCH_OK): every
  // page was resident and below the watermark and the stopgap had nothing to do; false when the
  // locked fault must run, with nothing changed. unpin_hit answers what is left to do.
  // `pins` is the calling thread's own (its reader slot's).
  bool fault_hit(thread_hit_pins& pins, pager_region& r, uint64_t offset, uint64_t size,
                 uint64_t* sig, size_t sig_cap, size_t* sig_len, uint64_t* newly_mapped) noexcept;
  enum class unpin_result { done, release_above_watermark, locked };
  unpin_result unpin_hit(thread_hit_pins& pins, pager_region& r, uint64_t offset,
                         uint64_t size) noexcept;
  // Frees the resident, unpinned pages of [offset, offset + size) at or above the watermark (an
  // unpin that raced an eviction leaves them to this), with unpin's sync before and after.
  orch_status release_above_watermark(pager_region* r, uint64_t offset, uint64_t size);

  orch_status set_watermark(pager_region* r, uint64_t bytes);
  orch_status set_watermark_limit(pager_region* r, uint64_t bytes);
  orch_status reset_watermark_limits();
  orch_status evict(pager_region* r, uint64_t bytes, uint64_t* freed);
  orch_status reclaim(uint64_t bytes, uint32_t flags, uint64_t* freed);

  orch_status residency(pager_region* r, uint8_t* flags, size_t cap, size_t* len);
  orch_status region_resident_bytes(pager_region* r, uint64_t* bytes);
  orch_status resident_bytes(uint64_t* bytes);
  orch_status pinned_bytes(uint64_t* bytes);
  orch_status budget_deficit(uint64_t request, int64_t* deficit);
  orch_status poll();
  orch_status account_external(int64_t delta);
  orch_status usage(orch_pager_usage* out);
  orch_status stats(orch_pager_stats* out);

 private:
  pager_device(const orch_backend_api* backend, orch_device* device, const pager_options& options,
               uint64_t total, const host_link* host) noexcept;

  // The mutex, and at the end of its hold the end of every lowering it began (hit_pins.hpp).
  class device_lock {
   public:
    explicit device_lock(pager_device& d) : d_(d), lock_(d.mutex_) {}
    device_lock(pager_device& d, std::try_to_lock_t) : d_(d), lock_(d.mutex_, std::try_to_lock) {}
    ~device_lock() {
      if (lock_.owns_lock()) d_.end_lowering_locked();
    }
    device_lock(const device_lock&) = delete;
    device_lock& operator=(const device_lock&) = delete;
    bool owns_lock() const noexcept { return lock_.owns_lock(); }

   private:
    pager_device& d_;
    std::unique_lock<std::mutex> lock_;
  };

  // Before the first watermark store of a lowering of r in this hold: marks r and fences the
  // hit path's readers once.
  void begin_lowering_locked(pager_region& r) noexcept;
  void end_lowering_locked() noexcept;
  // claim_unpinned, for a page no thread's hit pin record holds either.
  static uint64_t claim_locked(page_slot& p) noexcept;
  static bool pinned(const page_slot& p, const hit_pin_snapshot& records) noexcept;
  // The hit path's own records (hit_pins.hpp): fault_recorded answers whether it pinned,
  // refused (the locked fault must run) or had no record to use (the word path may try).
  enum class recorded { pinned, refused, no_record };
  recorded fault_recorded(thread_hit_pins& pins, pager_region& r, uint64_t first,
                          uint64_t end) noexcept;
  bool unpin_recorded(thread_hit_pins& pins, pager_region& r, uint64_t first, uint64_t end,
                      unpin_result& result) noexcept;

  int64_t capacity_locked() const noexcept;
  void publish_gate_locked() noexcept;
  // Lock-free, so the hit path can read it: the backend's clock (sim's injectable one), else the
  // host's as lent at init, else CLOCK_MONOTONIC. Inline: the hit path reads it on every fault.
  uint64_t fast_now_ns() const noexcept {
    if (backend_now_ != nullptr) return backend_now_(device_);
    return host_clock_ != nullptr ? host_clock_(host_clock_ctx_) : monotonic_ns();
  }
  void fold_counters_locked(page_slot& p) noexcept;
  void release_above_watermark_locked(pager_region& r, uint64_t first, uint64_t end) noexcept;
  int64_t usage_locked() const noexcept;
  uint64_t now_ns() const noexcept;
  void poll_locked(bool force) noexcept;
  int64_t deficit_locked(uint64_t request) noexcept;

  orch_status map_page_locked(pager_region& r, uint64_t index) noexcept;
  void free_page_locked(pager_region& r, uint64_t index, uint64_t old, uint32_t reason) noexcept;
  uint64_t pinned_pages_locked(const pager_region& r,
                               const hit_pin_snapshot& records) const noexcept;
  // Waits for the device's work. False once a synchronisation has failed: the device may still
  // be reading any page, so none is freed from then on, and every call that would free or map
  // one answers ORCH_DEVICE_ERROR (a hit, which does neither, still answers) (the worker is restarted; docs/gpu.md, "Driver statuses").
  bool sync_locked() noexcept;
  orch_status sync_status_locked() const noexcept {
    return sync_failed_ ? ORCH_DEVICE_ERROR : ORCH_OK;
  }
  bool lower_one_locked(pager_region& r, bool& synced) noexcept;
  uint64_t free_pages_locked(int64_t bytes) noexcept;
  bool evict_step_locked(bool& synced, bool& freed) noexcept;
  void rationalise_locked(pager_region& r, uint64_t first_missing, uint64_t page_end) noexcept;
  orch_status oom_locked() noexcept;

  std::mutex mutex_;
  const orch_backend_api* backend_;
  orch_device* device_;
  pager_options options_;
  uint64_t total_;
  const host_link* host_;
  std::list<pager_region*> priority_;  // front: highest priority (newest, §4.4)
  uint64_t page_bytes_ = 0;
  int64_t external_bytes_ = 0;
  uint64_t next_serial_ = 0;
  // Polled term (§4.6): deficit_sync from the last poll plus our own usage delta since.
  bool polled_ = false;
  uint64_t last_poll_ns_ = 0;
  int64_t deficit_sync_ = 0;
  int64_t usage_at_poll_ = 0;
  uint64_t last_free_ = 0;
  bool poll_failure_logged_ = false;
  bool lowering_any_ = false;  // some region's lowering_ is set (device_lock ends it)
  orch_pager_stats stats_{};
  bool sync_failed_ = false;  // sticky: see sync_locked
  // What the hit path reads instead of taking the mutex (publish_gate_locked): the stopgap
  // `free(deficit(0))` is a no-op while the process-wide simple headroom is at most
  // fast_headroom_limit_ and no poll is due (now - poll_last_ns_ < poll_interval_ns_). A torn
  // read of the pair during a publish at worst sends one call down the locked path needlessly, or
  // lets it skip a poll that fell due at that same instant.
  std::atomic<int64_t> fast_headroom_limit_{INT64_MIN};
  std::atomic<uint64_t> poll_last_ns_{0};
  std::atomic<uint64_t> poll_interval_ns_{0};
  // The host clock as lent at init (host_link's own accessor takes a lock), and the backend's,
  // both read once here so the hit path loads one pointer instead of the backend's table.
  uint64_t (*host_clock_)(void*) = nullptr;
  void* host_clock_ctx_ = nullptr;
  uint64_t (*backend_now_)(orch_device*) = nullptr;
  // log2 of the page size where it is a power of two (2 MiB granules, aimdo's 32 MiB), else -1:
  // the hit path finds its pages by shift (pager_fast_path.cpp).
  int page_shift_ = -1;
};

}  // namespace orch::plugin_detail
