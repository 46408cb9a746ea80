// child_process: the one way this host starts and reaps a process, a worker, a plugin probe or a
// tool of the env manager (docs/runtime.md; docs/references.md, anchors §3.1 on Ray's worker
// start). The child:
//   - gets its own process group, so a signal to the group reaches anything it forks;
//   - sets PR_SET_PDEATHSIG(SIGKILL) and then checks that its parent is still the host (the
//     parent may have died between fork and prctl, in which case no signal would ever come).
//     The signal fires when the *thread* that forked exits, so the host spawns only from threads
//     that outlive the child (its main thread, its io thread, a tool's caller that waits);
//   - inherits exactly the descriptors the request names, at the numbers it names, and stdin,
//     stdout and stderr; every other fd is closed before exec, so no host segment or socket
//     leaks into node code or a tool;
//   - reports a failed execve (or a failed fd set-up or chdir before it) on a close-on-exec pipe:
//     the parent reads end of file when execve succeeded, or the errno when it did not. A child
//     that cannot be executed is therefore an error of spawn_process, never an exit status to
//     guess at.
// Every child is counted as started on purpose (adopted_children.hpp) until it is reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::process {

// The descriptors of a worker (comfy-orch-worker's --channel-fd, --fd-socket, --token-fd).
inline constexpr int worker_channel_fd = 3;
inline constexpr int worker_fd_socket = 4;
inline constexpr int worker_token_fd = 5;
// A Python worker's listening socket for its pack's aiohttp routes (--web-fd).
inline constexpr int worker_web_fd = 6;

// comfy-orch-worker's exit statuses that mean "a retry cannot succeed" (worker/include/orch/
// worker/worker.h ORCH_WORKER_EXIT_USAGE and _SETUP; the host links nothing of the worker).
inline constexpr int worker_exit_usage = 64;
inline constexpr int worker_exit_setup = 66;

// One descriptor of the host's that the child gets as `target` (3 to 9).
struct inherited_fd {
  int source = -1;
  int target = -1;
};

struct spawn_request {
  std::string executable;  // a path; not searched on PATH
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> envp;  // "NAME=value"
  std::vector<inherited_fd> fds;
  // Becomes fds 1 and 2 in the child (fd 0 is /dev/null then); -1: the host's own 0, 1 and 2.
  int output_fd = -1;
  std::string working_directory;  // the child's cwd; empty: the host's
};

// Returns once the child has exec'd. Errors: "spawn_failed" (pipe or fork failed, or a target
// fd out of range; errno text), "exec_failed" (execve, moving the inherited fds or entering the
// working directory failed in the child; names the executable and the errno text; the child is
// reaped). An exec failure cannot succeed on a retry.
result<pid_t> spawn_process(const spawn_request& request);

// Waits for `pid` to exit for up to `grace`, then SIGKILLs its process group and waits for it.
// Returns the wait status. Never fails: an unknown pid reads as already reaped (status 0).
int reap_process(pid_t pid, std::chrono::milliseconds grace) noexcept;

// The wait status of `pid` if it has ended (reaped, and its process group killed), else nothing;
// for a caller that polls (a tool whose output it reads meanwhile).
std::optional<int> try_reap_process(pid_t pid) noexcept;

// Describes a wait status: "exited with 3", "killed by SIGKILL".
std::string describe_exit(int status);

}  // namespace orch::process
