// Grace periods for the pager's lock-free hit path (pager_fast_path.cpp).
//
// A hit-path call runs inside a reader_section: it announces itself in a slot of its own thread,
// looks its region up, works, and clears the slot. Whoever frees a region or a device
// (region_destroy, device_close, shutdown) first unpublishes it, so no later lookup can find it,
// and then calls wait_for_readers(), which returns once every section that might have found it
// has ended. So a reader never touches freed memory, and it pays no atomic read-modify-write and
// no fence for this: the writer does the fencing for both sides with membarrier(2) (the
// "asymmetric fence" of userspace RCU). Where membarrier is unavailable, readers announce
// themselves with a seq_cst store instead (an implicit fence: slower, equally correct).
//
// The section itself is inline: it runs twice per hit (fault and unpin), where an out-of-line
// call was a sixth of the hit path's time.
#pragma once

#include <atomic>
#include <cstdint>

#include "hit_pins.hpp"

namespace orch::plugin_detail {

// One cache line per thread, so a reader's stores never contend with another reader's.
struct alignas(64) reader_slot {
  std::atomic<uint32_t> active{0};
  std::atomic<bool> taken{false};
  thread_hit_pins hit_pins;  // hit_pins.hpp
};

namespace reader_grace_detail {
// initial-exec: one instruction to reach it, where the default model calls __tls_get_addr;
// constinit: no TLS init wrapper to test on every access.
extern constinit thread_local reader_slot* this_thread_slot
    __attribute__((tls_model("initial-exec")));
extern std::atomic<bool> asymmetric;  // membarrier(2) fences for the readers
// The first section of a thread: takes a free slot and records it in this_thread_slot. Null
// when every slot is taken.
reader_slot* take_slot() noexcept;
}  // namespace reader_grace_detail

class reader_section {
 public:
  reader_section() noexcept : slot_(reader_grace_detail::this_thread_slot) {
    if (slot_ == nullptr) slot_ = reader_grace_detail::take_slot();
    if (slot_ == nullptr) return;
    if (reader_grace_detail::asymmetric.load(std::memory_order_relaxed)) {
      slot_->active.store(1, std::memory_order_relaxed);
      // Only the compiler must keep the lookup after the store; the writer's membarrier orders
      // the CPU.
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      slot_->active.store(1, std::memory_order_seq_cst);
    }
  }
  ~reader_section() {
    if (slot_ != nullptr) slot_->active.store(0, std::memory_order_release);
  }
  reader_section(const reader_section&) = delete;
  reader_section& operator=(const reader_section&) = delete;
  // False when this thread has no slot (all taken): the caller takes the locked path.
  explicit operator bool() const noexcept { return slot_ != nullptr; }
  reader_slot& slot() const noexcept { return *slot_; }

 private:
  reader_slot* slot_;
};

// True when the writer fences for the readers (membarrier(2)): the readers' plain stores are
// then as good as seq_cst ones to a writer that calls fence_readers() (hit_pins.hpp).
inline bool readers_fenced_by_writer() noexcept {
  return reader_grace_detail::asymmetric.load(std::memory_order_relaxed);
}

// Every slot ever handed out: [slots, slots + count). Slots are never freed.
reader_slot* reader_slots(unsigned* count) noexcept;

// The writer's half of the fence alone: on return, every store a reader made before the call
// is visible, and every load a reader makes after it sees what the caller stored before it.
void fence_readers() noexcept;

// Sets up the writer's fence; called from plugin init. Idempotent.
void init_reader_grace() noexcept;

// Returns once every reader section that began before this call has ended. The caller has
// already made what it will free unreachable (a seq_cst store). Never call it inside a section.
void wait_for_readers() noexcept;

}  // namespace orch::plugin_detail
