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
#pragma once

namespace orch::plugin_detail {

class reader_section {
 public:
  reader_section() noexcept;
  ~reader_section();
  reader_section(const reader_section&) = delete;
  reader_section& operator=(const reader_section&) = delete;
  // False when this thread has no slot (all taken): the caller takes the locked path.
  explicit operator bool() const noexcept { return slot_ != nullptr; }

 private:
  struct slot* slot_;
};

// Sets up the writer's fence; called from plugin init. Idempotent.
void init_reader_grace() noexcept;

// Returns once every reader section that began before this call has ended. The caller has
// already made what it will free unreachable (a seq_cst store). Never call it inside a section.
void wait_for_readers() noexcept;

}  // namespace orch::plugin_detail
