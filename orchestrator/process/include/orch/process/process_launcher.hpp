// process_launcher: the seam between the supervisor's state machine and the processes it runs
// (docs/runtime.md, "Supervision"; STYLE.md on Ray's raylet, whose fake process launcher lets
// its worker pool be tested without forking). Everything the supervisor does to a worker's
// process goes through one: starting it, signalling its process group, reaping it, and reading
// the identity its control slot is claimed for. The real one is child_process_launcher
// (child_process.hpp underneath); unit tests pass a fake that runs an in-process worker instead.
//
// Threading: the supervisor calls it from its io thread (the first spawns from the thread that
// starts the host); an implementation needs no locks for the supervisor's sake.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "orch/ipc/process_identity.hpp"
#include "orch/process/child_process.hpp"
#include "orch/support/result.hpp"

namespace orch::process {

class process_launcher {
 public:
  process_launcher() = default;
  process_launcher(const process_launcher&) = delete;
  process_launcher& operator=(const process_launcher&) = delete;
  virtual ~process_launcher() = default;

  // Starts `request` and returns its pid once it runs. The request's descriptors stay the
  // caller's (a launcher that keeps one duplicates it). Errors: as spawn_process
  // ("spawn_failed", "exec_failed": the latter cannot succeed on a retry).
  virtual result<pid_t> spawn(const spawn_request& request) = 0;
  // Sends `signal` to the process group `pid` leads; a process already gone is no error.
  virtual void signal_group(pid_t pid, int signal) noexcept = 0;
  // As reap_process: waits up to `grace`, then SIGKILLs the group; the wait status.
  virtual int reap(pid_t pid, std::chrono::milliseconds grace) noexcept = 0;
  // As try_reap_process: the wait status once `pid` has ended, else nothing.
  virtual std::optional<int> try_reap(pid_t pid) noexcept = 0;
  // The identity a control slot is claimed for (process_identity.hpp). Errors:
  // "no_such_process", "bad_stat".
  virtual result<ipc::process_identity> identity(pid_t pid) = 0;
};

}  // namespace orch::process
