// control_segment: the one pinned budget of a host, one budget slot per process and one control
// block per process (docs/shared-memory.md, "The one pinned budget"; no worker
// can exhaust the pinned budget for all).
//
// The rule (docs/shared-memory.md): a worker can write its own slot and nothing else, and the host
// never trusts a word a worker can write for the total. So the memory is split by writer:
//
//   control memfd (one, every process maps it)       written by the host only
//     page 0:  control_header: geometry and the budget
//     page 1…: slot_record[n]: pid, start time and grant of each slot
//   slot memfd (one per claimed slot, only its owner gets it)   written by its owner
//     slot_counters: reserved, high_water | control_block
//
// After mapping the control memfd writable the host seals it with F_SEAL_FUTURE_WRITE: a worker
// maps it read-only, and neither a re-open through /proc/self/fd/N nor write(2) nor mprotect
// can make it writable. A slot memfd is created fresh at each claim and sent to its owner only,
// so an earlier owner's fd (or a process that inherited it) writes into a file nobody reads.
//
// Accounting without a shared total (docs/references.md, anchors §8.3.2, RMM's limiting
// adaptor with per-owner slots, plus grants): the host gives each slot a `grant`, and the sum of
// grants never passes the budget. A process reserves lock-free within its grant with one CAS on
// its own `reserved` word; beyond it, it asks its grant source (the host, by message) for more.
// The host computes every total itself: a slot counts min(reserved, grant), so a slot claiming
// more is clamped to its grant and flagged. Taking unused grant back is lock-free too: the host
// lowers the grant, re-reads `reserved`, and raises the grant back to cover a reservation that
// slipped in between; a reservation re-reads the grant after its CAS and undoes itself when it
// no longer fits (the proof is in control_segment.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "orch/ipc/control_block.hpp"
#include "orch/ipc/memfd_segment.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t control_segment_magic = 0x4c54434fu;  // "OCTL"
// 3: grants, per-slot memfds; 4: a call lane doorbell; 5: without it (the lane's own page)
inline constexpr std::uint16_t control_segment_version = 5;

// In the control memfd. Host only; read-only everywhere else.
struct alignas(64) slot_record {
  std::atomic<std::uint64_t> pid;         // 0: free
  std::atomic<std::uint64_t> start_time;  // /proc/<pid>/stat field 22
  std::atomic<std::uint64_t> grant;       // bytes the owner may hold
  std::uint64_t padding[5];
};
static_assert(std::is_standard_layout_v<slot_record> && sizeof(slot_record) == 64);

// First in a slot memfd. Owner only: the host reads these words as claims, never as facts.
struct alignas(64) slot_counters {
  std::atomic<std::uint64_t> reserved;    // bytes the process holds now
  std::atomic<std::uint64_t> high_water;  // most it ever held
  std::uint64_t padding[6];
};
static_assert(std::is_standard_layout_v<slot_counters> && sizeof(slot_counters) == 64);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Page 0 of the control memfd, written once by the host before it seals the memfd.
struct control_header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;  // sizeof(control_header)
  std::uint32_t slot_count;
  std::uint32_t record_size;     // sizeof(slot_record)
  std::uint32_t block_size;      // sizeof(control_block)
  std::uint32_t counters_size;   // sizeof(slot_counters)
  std::uint64_t total_size;      // the control memfd's sealed size
  std::uint64_t records_offset;  // one page
  std::uint64_t slot_size;       // a slot memfd's size (one page)
  std::uint64_t budget_bytes;
  std::uint64_t padding[1];
};
static_assert(std::is_standard_layout_v<control_header> && sizeof(control_header) == 64);

// The slow path of a reservation: asked for `shortfall` bytes more than the account's grant.
// ok: the grant may have grown (the account re-checks). An error is the reservation's error.
using grant_source = std::function<status(std::uint64_t shortfall)>;

// The host's limit on the sum of its grants beyond its own budget (the machine ledger, which
// other hosts share): asked before the sum grows to `total`, told after it shrinks. An error
// refuses the growth and is returned as is.
using grant_limit = std::function<status(std::uint64_t total)>;

class control_segment {
 public:
  // Host: creates the control memfd with the budget and `slot_count` free slots (1..4096) and
  // seals it against later writers; a kernel that refuses the seal is logged once (the segment
  // then only has its size sealed). Errors: "invalid_argument", memfd /
  // mapping errors.
  static result<control_segment> create(std::uint64_t budget_bytes, std::uint32_t slot_count);
  // Worker: adopts the control fd and its own slot's fd. Checks magic, version and that the
  // geometry fits the fd's real size ("bad_segment"), that `slot` is in range and recorded for
  // this very process ("bad_slot"); maps the control memfd read-only and the slot memfd
  // read-write.
  static result<control_segment> attach(unique_fd control_fd, unique_fd slot_fd,
                                        std::uint32_t slot);

  int fd() const noexcept { return file_.fd(); }
  // The fd of claimed slot `index`'s memfd, to send to its owner; -1 when not mapped here or
  // already taken.
  int slot_fd(std::uint32_t index) const noexcept;
  // Host: hands over slot `index`'s fd (the mapping stays). The host drops it once sent, so no
  // fd of another process's slot is left in the host for a worker to re-open through
  // /proc/<host>/fd.
  unique_fd take_slot_fd(std::uint32_t index) noexcept;
  // Geometry and budget as copied at create/attach: never re-read from shared memory.
  std::uint64_t total_size() const noexcept { return total_size_; }
  std::uint64_t budget() const noexcept { return budget_; }
  std::uint32_t slot_count() const noexcept { return slot_count_; }
  // The header page as mapped here: read-only in a worker, writable only in the host.
  std::span<const std::byte> header_page() const noexcept { return header_.bytes(); }
  bool header_writable() const noexcept { return header_.writable(); }
  // True when later writable mappings and write(2) of the control memfd are refused.
  bool sealed_against_writers() const noexcept { return file_.future_writes_sealed(); }

  // Host-side accounting, never from a word a worker can write:
  // the sum of every owned slot's counted bytes (min(reserved, grant)).
  std::uint64_t total_reserved();
  // The sum of every slot's grant: never above budget().
  std::uint64_t granted_total() const noexcept { return granted_total_; }
  // Bytes claimed by reclaimed slots beyond their grant (see reclaim_slot). Host-local.
  std::uint64_t overclaimed_bytes() const noexcept { return overclaimed_bytes_; }
  // Slot `index` (owned): what it counts for, min(reserved, grant); a claim beyond the highest
  // grant its owner could have seen flags it (logged once with its pid).
  std::uint64_t counted_reserved(std::uint32_t index);
  // True once slot `index`'s owner claimed more than it was granted (until the slot is freed).
  bool flagged(std::uint32_t index) const noexcept;
  // The owner's own word, as written: a claim.
  std::uint64_t claimed_reserved(std::uint32_t index) const noexcept;
  std::uint64_t grant(std::uint32_t index) const noexcept;
  const slot_record& record(std::uint32_t index) const noexcept;
  // `index` must be mapped here: every claimed slot in the host, the own slot in a worker.
  slot_counters& counters(std::uint32_t index) const noexcept;
  control_block& block(std::uint32_t index) const noexcept;

  // Host: gives a free slot to a process, with a fresh slot memfd and a grant of 0.
  // Errors: "no_free_slot", memfd / mapping errors.
  result<std::uint32_t> claim_slot(const process_identity& owner);
  // Host: frees slot `index` and its grant. Returns the bytes it counted for (at most its grant);
  // a claim beyond the grant is added to overclaimed_bytes() with an error log.
  std::uint64_t reclaim_slot(std::uint32_t index) noexcept;
  // Host: reclaims every slot whose owner is no longer alive; returns the indices reclaimed.
  std::vector<std::uint32_t> reclaim_dead();

  // Host: lets slot `index` hold `shortfall` bytes more than its grant, plus up to `slack` more
  // when the budget has room (so the next small reservations need no message). When the free
  // budget is short it first takes back other slots' unused grant. Returns the new grant.
  // Errors: "budget_exceeded" (nothing changed), or the grant limit's error.
  result<std::uint64_t> grow_grant(std::uint32_t index, std::uint64_t shortfall,
                                   std::uint64_t slack = 0);
  // Host: takes back what slot `index` holds beyond its reservation; returns the bytes.
  std::uint64_t revoke_unused(std::uint32_t index) noexcept;
  void set_grant_limit(grant_limit limit) { limit_ = std::move(limit); }

 private:
  struct owned_slot {
    unique_fd fd;  // until taken
    mapping map;
  };
  struct host_view {            // host-local, per slot
    std::uint64_t ceiling = 0;  // highest grant the owner may have seen since it last fit
    bool flagged = false;
  };
  control_segment(memfd_segment file, mapping header, mapping records, std::uint32_t slot_count,
                  std::uint64_t budget) noexcept;
  slot_record& rec(std::uint32_t index) const noexcept;
  void set_grant(std::uint32_t index, std::uint64_t grant) noexcept;
  status approve_total(std::uint64_t total);
  void tell_total() noexcept;
  std::uint64_t revoke_others(std::uint32_t except, std::uint64_t wanted) noexcept;

  memfd_segment file_;
  mapping header_;   // page 0
  mapping records_;  // slot_record[n]: writable in the host only
  std::uint32_t slot_count_;
  std::uint64_t budget_;
  std::uint64_t total_size_;
  std::vector<std::optional<owned_slot>> slots_;
  std::vector<host_view> views_;
  std::uint64_t granted_total_ = 0;
  std::uint64_t overclaimed_bytes_ = 0;
  grant_limit limit_;
};

// One process's handle on its slot (`slot` mapped in `segment`). Lock-free within the grant;
// safe to use from several threads of the process.
class budget_account {
 public:
  budget_account(const control_segment& segment, std::uint32_t slot) noexcept;

  // Reserves `bytes` within the grant; beyond it, asks the grant source (if any) and tries
  // again. Errors: "budget_exceeded" (nothing changed), or the grant source's error.
  status reserve(std::uint64_t bytes);
  // Returns `bytes` previously reserved by this account (never below 0).
  void release(std::uint64_t bytes) noexcept;
  // Not thread-safe against reserve(): set it before the account is shared.
  void set_grant_source(grant_source source) { source_ = std::move(source); }

  std::uint64_t reserved() const noexcept {
    return counters_->reserved.load(std::memory_order_acquire);
  }
  std::uint64_t high_water() const noexcept {
    return counters_->high_water.load(std::memory_order_acquire);
  }
  std::uint64_t grant() const noexcept { return grant_->load(std::memory_order_acquire); }
  std::uint64_t budget() const noexcept { return budget_; }

 private:
  // One lock-free attempt within the grant: true when reserved; else `shortfall` is set.
  bool try_reserve(std::uint64_t bytes, std::uint64_t& shortfall) noexcept;

  const std::atomic<std::uint64_t>* grant_;
  slot_counters* counters_;
  std::uint64_t budget_;
  grant_source source_;
};

}  // namespace orch::ipc
