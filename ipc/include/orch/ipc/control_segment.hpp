// control_segment: the one shared segment that carries the global pinned budget, one budget slot
// per process and one control block per process (DESIGN.md §4.3, issue 4 "One global pinned
// budget"). It answers the seed's "Every process budgets pinned memory independently": here N
// workers and the host all reserve from one number, so together they can never promise more.
//
// Accounting is lock-free (reference/architecture-anchors.md §8.3.2, RMM's limiting adaptor with
// per-owner slots): a reservation is a CAS on the global total that never lets it pass the
// budget, then an add to the process's own slot. Only the host writes slot ownership (pid and
// start time); a process writes only its own slot's counters; the host reclaims a dead process's
// slot by subtracting what the slot holds, bounded by what the total can hold for it.
//
// The one window that cannot be made exact without a double-word CAS: a process killed between
// the global CAS and the slot add. The slot's `pending` word says an operation was in flight;
// the host then keeps those bytes counted (safe: the budget is under-used, never exceeded), logs
// them and adds them to `unresolved_bytes` so the loss is visible.
//
// Layout of the memfd (version 2):
//
//   page 0:  control_header: fixed geometry and the budget     read-only in workers
//   page 1…: control_counters | budget_slot[n] | control_block[n]   read-write everywhere
//
// Every worker can write the shared pages, so nothing the host trusts lives there: the geometry
// and the budget are copied into the control_segment object at create/attach (checked against
// the mapping's real size on attach) and never read from shared memory again. The header page
// is also mapped read-only in workers, as pool_segment does for its metadata, so a stray write
// there faults in the writer instead of corrupting what other workers attach to.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "orch/ipc/control_block.hpp"
#include "orch/ipc/memfd_segment.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t control_segment_magic = 0x4c54434fu;  // "OCTL"
inline constexpr std::uint16_t control_segment_version = 2;

struct alignas(64) budget_slot {
  std::atomic<std::uint64_t> pid;         // 0: free. Host only.
  std::atomic<std::uint64_t> start_time;  // /proc/<pid>/stat field 22. Host only.
  std::atomic<std::uint64_t> reserved;    // bytes the process holds now. Owner only.
  std::atomic<std::uint64_t> high_water;  // most it ever held. Owner only.
  std::atomic<std::uint64_t> pending;     // bytes of operations in flight. Owner only.
  std::uint64_t padding[3];
};
static_assert(std::is_standard_layout_v<budget_slot> && sizeof(budget_slot) == 64);

// Written once by the host before the segment is shared; read-only in workers.
struct control_header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;  // sizeof(control_header)
  std::uint32_t slot_count;
  std::uint32_t slot_size;      // sizeof(budget_slot)
  std::uint32_t block_size;     // sizeof(control_block)
  std::uint32_t counters_size;  // sizeof(control_counters)
  std::uint64_t total_size;     // the memfd's sealed size
  std::uint64_t shared_offset;  // where control_counters starts: one page
  std::uint64_t budget_bytes;
  std::uint64_t padding[2];
};
static_assert(std::is_standard_layout_v<control_header> && sizeof(control_header) == 64);

// The shared counters, first in the read-write pages.
struct alignas(64) control_counters {
  std::atomic<std::uint64_t> total_reserved;
  std::atomic<std::uint64_t> unresolved_bytes;  // see the header comment. Host only.
  std::uint64_t padding[6];
};
static_assert(std::is_standard_layout_v<control_counters> && sizeof(control_counters) == 64);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

class control_segment {
 public:
  // Host: creates the segment with the budget and `slot_count` free slots (1..4096).
  // Errors: "invalid_argument", memfd_segment / mapping errors.
  static result<control_segment> create(std::uint64_t budget_bytes, std::uint32_t slot_count);
  // Worker: adopts the received fd, checks magic, version and that the geometry fits the fd's
  // real size ("bad_segment"), maps the header page read-only and the rest read-write.
  static result<control_segment> attach(unique_fd fd);

  int fd() const noexcept { return file_.fd(); }
  // Geometry and budget as copied at create/attach: never re-read from shared memory.
  std::uint64_t total_size() const noexcept { return total_size_; }
  std::uint64_t budget() const noexcept { return budget_; }
  std::uint32_t slot_count() const noexcept { return slot_count_; }
  // The header page as mapped here: read-only in a worker (attach), writable only in the host
  // (create). Exposed for inspection and tests.
  std::span<const std::byte> header_page() const noexcept { return header_.bytes(); }
  bool header_writable() const noexcept { return header_.writable(); }

  std::uint64_t total_reserved() const noexcept {
    return counters().total_reserved.load(std::memory_order_acquire);
  }
  std::uint64_t unresolved_bytes() const noexcept {
    return counters().unresolved_bytes.load(std::memory_order_acquire);
  }
  // Host-local, not shared (a worker could forge a shared counter): bytes that reclaimed slots
  // claimed beyond what the total could hold for them (see reclaim_slot). Non-zero means a
  // worker wrote a wrong `reserved` word.
  std::uint64_t overclaimed_bytes() const noexcept { return overclaimed_bytes_; }
  // `index` < slot_count().
  budget_slot& slot(std::uint32_t index) const noexcept;
  control_block& block(std::uint32_t index) const noexcept;

  // Host: gives a free slot to a process. Errors: "no_free_slot".
  result<std::uint32_t> claim_slot(const process_identity& owner);
  // Host: frees slot `index`, returning the bytes it held to the budget. Returns those bytes.
  // The slot's `reserved` word is the owner's claim; the host returns at most what the total
  // holds beyond the other owned slots, never letting the total go below 0, and adds any excess
  // to overclaimed_bytes() with an error log.
  std::uint64_t reclaim_slot(std::uint32_t index) noexcept;
  // Host: reclaims every slot whose owner is no longer alive; returns the indices reclaimed.
  std::vector<std::uint32_t> reclaim_dead();

 private:
  friend class budget_account;
  control_segment(memfd_segment file, mapping header, mapping shared, std::uint32_t slot_count,
                  std::uint64_t budget) noexcept;
  control_counters& counters() const noexcept {
    return *reinterpret_cast<control_counters*>(shared_.data());
  }

  memfd_segment file_;
  mapping header_;  // page 0; read-only in workers
  mapping shared_;  // counters, slots and blocks
  std::uint32_t slot_count_;
  std::uint64_t budget_;
  std::uint64_t total_size_;
  std::uint64_t overclaimed_bytes_ = 0;
};

// One process's handle on its slot (`slot` < slot_count(), the slot the host gave this process).
// Lock-free; safe to use from several threads of the process.
class budget_account {
 public:
  budget_account(const control_segment& segment, std::uint32_t slot) noexcept;

  // Reserves `bytes` against the global budget. Errors: "budget_exceeded" (nothing changed).
  status reserve(std::uint64_t bytes);
  // Returns `bytes` previously reserved by this account.
  void release(std::uint64_t bytes) noexcept;

  std::uint64_t reserved() const noexcept {
    return slot_->reserved.load(std::memory_order_acquire);
  }
  std::uint64_t high_water() const noexcept {
    return slot_->high_water.load(std::memory_order_acquire);
  }
  std::uint64_t budget() const noexcept { return budget_; }

 private:
  std::atomic<std::uint64_t>* total_;
  budget_slot* slot_;
  std::uint64_t budget_;
};

}  // namespace orch::ipc
