// worker_process: spawning and reaping one worker process (docs/runtime.md;
// docs/references.md, anchors §3.1 on Ray's worker start). The child:
//   - gets its own process group, so a signal to the group reaches anything node code forked;
//   - sets PR_SET_PDEATHSIG(SIGKILL) and then checks that its parent is still the host (the
//     parent may have died between fork and prctl, in which case no signal would ever come).
//     The signal fires when the *thread* that forked exits, so the host spawns only from its
//     main thread or its io thread, both of which outlive every worker;
//   - inherits the channel end as fd 3, the fd-socket end as fd 4 and, for a worker, the read end
//     of a pipe holding the startup token as fd 5 (the worker reads it once and closes it: an
//     environment variable would stay readable in /proc/<pid>/environ); every other fd is closed
//     before exec, so no host segment or socket leaks into node code;
//   - reports a failed execve (or a failed fd set-up before it) on a close-on-exec pipe: the
//     parent reads end of file when execve succeeded, or the errno when it did not. A worker that
//     cannot be executed is therefore an error of spawn_worker, never an exit status to guess at.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::orchestrator {

inline constexpr int worker_channel_fd = 3;
inline constexpr int worker_fd_socket = 4;
inline constexpr int worker_token_fd = 5;

// comfy-orch-worker's exit statuses that mean "a retry cannot succeed" (worker/include/orch/
// worker/worker.h ORCH_WORKER_EXIT_USAGE and _SETUP; the host links nothing of the worker).
inline constexpr int worker_exit_usage = 64;
inline constexpr int worker_exit_setup = 66;

struct spawn_request {
  std::string executable;
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> envp;  // "NAME=value"
  int channel_fd = -1;            // becomes fd 3 in the child
  int fd_socket = -1;             // becomes fd 4 in the child
  int token_fd = -1;              // becomes fd 5 in the child; -1: none
  // Becomes fds 1 and 2 in the child (fd 0 is /dev/null then); -1: the host's own.
  int output_fd = -1;
  std::string working_directory;  // the child's cwd; empty: the host's
};

// Returns once the child has exec'd. Errors: "spawn_failed" (pipe or fork failed; errno text),
// "exec_failed" (execve, or moving the inherited fds, failed in the child; names the executable
// and the errno text; the child is reaped). An exec failure cannot succeed on a retry.
result<pid_t> spawn_worker(const spawn_request& request);

// Waits for `pid` to exit for up to `grace`, then SIGKILLs its process group and waits for it.
// Returns the wait status. Never fails: an unknown pid reads as already reaped (status 0).
int reap_worker(pid_t pid, std::chrono::milliseconds grace) noexcept;

// Describes a wait status: "exited with 3", "killed by SIGKILL".
std::string describe_exit(int status);

}  // namespace orch::orchestrator
