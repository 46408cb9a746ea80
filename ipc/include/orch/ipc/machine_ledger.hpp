// machine_ledger: one pinned budget per machine, not per host (docs/shared-memory.md, "One
// budget per machine"). Hosts on one machine (two ComfyUI instances, one per GPU) each compute
// the same budget, and each alone kept within it: three hosts reserved 27.9 GB of pinned pools on
// 23.5 GB of RAM. The ledger is a named POSIX shared-memory file, one page, with one slot per
// host: {pid, start time, bytes reserved}. A host joins at start, asks the ledger before the sum
// of its grants grows (control_segment's grant_limit), and leaves at exit.
//
// Every change happens under flock(LOCK_EX) on the file: hosts change their reservation only at
// start, at exit and on a grant's slow path, so a lock costs nothing that matters, and no host
// ever trusts a shared total: the total is the sum of the slots, read under the lock. Whoever
// holds the lock and finds the file empty (size 0: just created, or its creator died before it
// wrote it) initialises it, so creation is race-free without O_EXCL. A dead host's slot (pid and
// start time, process_identity.hpp) is reclaimed by the next host that takes the lock. The last
// host to leave unlinks the name; a host that opened the name just before checks, once it holds
// the lock, that the name still leads to its file, and opens again if not.
//
// Trust: the file is the user's (0600, checked with its owner), so it is shared by that user's
// hosts only. Any process of that user can open it by name, workers included: it coordinates
// cooperating hosts and is not a boundary against a hostile worker (docs/shared-memory.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "orch/ipc/process_identity.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t machine_ledger_magic = 0x4744424fu;  // "OBDG"
inline constexpr std::uint16_t machine_ledger_version = 1;
inline constexpr std::uint32_t machine_ledger_slots = 63;
// Tests point hosts at a private ledger with it, so parallel runs do not share one budget.
inline constexpr const char* machine_ledger_variable = "ORCH_MACHINE_LEDGER_NAME";

struct ledger_host {
  std::uint64_t pid = 0;
  std::uint64_t start_time = 0;
  std::uint64_t reserved = 0;  // bytes
  std::uint64_t budget = 0;    // the budget that host computed
};

class machine_ledger {
 public:
  // ORCH_MACHINE_LEDGER_NAME when set, else "/comfy-orch-budget-<uid>".
  static std::string default_name();
  // Opens (creating if needed) the ledger `name` ("/name": one slash, then no slash) and takes
  // a slot for this process with 0 bytes. `budget` is this host's budget: its own reservations
  // are checked against it. Errors: "invalid_argument", "ledger_failed" (errno text),
  // "bad_ledger" (not ours, not 0600, or wrong size, magic or version: the message says how to
  // remove it), "no_free_slot".
  static result<machine_ledger> join(const std::string& name, std::uint64_t budget);
  machine_ledger(machine_ledger&& other) noexcept;
  machine_ledger& operator=(machine_ledger&&) = delete;
  machine_ledger(const machine_ledger&) = delete;
  ~machine_ledger();  // leaves: frees the slot, unlinks the name when no host is left

  // Sets this host's reservation to `bytes` when the other hosts' reservations plus `bytes` fit
  // the budget; a decrease always succeeds. Errors: "machine_budget_exceeded", naming every
  // other host (pid and reservation) and the fix; "ledger_failed".
  status reserve(std::uint64_t bytes);
  std::uint64_t reserved() const noexcept { return reserved_; }
  std::uint64_t budget() const noexcept { return budget_; }
  const std::string& name() const noexcept { return name_; }
  // Every live host now, this one included (dead ones are reclaimed first).
  result<std::vector<ledger_host>> hosts();

  // Reads the ledger `name` without joining it; an absent name is an empty list.
  static result<std::vector<ledger_host>> snapshot(const std::string& name);

 private:
  machine_ledger(std::string name, unique_fd fd, std::uint32_t slot, std::uint64_t budget) noexcept
      : name_(std::move(name)), fd_(std::move(fd)), slot_(slot), budget_(budget) {}

  std::string name_;
  unique_fd fd_;
  std::uint32_t slot_ = 0;
  std::uint64_t budget_ = 0;
  std::uint64_t reserved_ = 0;
};

}  // namespace orch::ipc
