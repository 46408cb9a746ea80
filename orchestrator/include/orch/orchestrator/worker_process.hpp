// worker_process: spawning and reaping one worker process (DESIGN.md §4.11,
// reference/architecture-anchors.md §3.1 on Ray's worker start). The child:
//   - gets its own process group, so a signal to the group reaches anything node code forked;
//   - sets PR_SET_PDEATHSIG(SIGKILL) and then checks that its parent is still the host (the
//     parent may have died between fork and prctl, in which case no signal would ever come).
//     The signal fires when the *thread* that forked exits, so the host spawns only from its
//     main thread or its io thread, both of which outlive every worker;
//   - inherits exactly two fds, the channel end as fd 3 and the fd-socket end as fd 4; every
//     other fd is closed before exec, so no host segment or socket leaks into node code.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::orchestrator {

inline constexpr int worker_channel_fd = 3;
inline constexpr int worker_fd_socket = 4;

struct spawn_request {
  std::string executable;
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> envp;  // "NAME=value"
  int channel_fd = -1;            // becomes fd 3 in the child
  int fd_socket = -1;             // becomes fd 4 in the child
};

// Errors: "spawn_failed" (fork failed; errno text).
result<pid_t> spawn_worker(const spawn_request& request);

// Waits for `pid` to exit for up to `grace`, then SIGKILLs its process group and waits for it.
// Returns the wait status. Never fails: an unknown pid reads as already reaped (status 0).
int reap_worker(pid_t pid, std::chrono::milliseconds grace) noexcept;

// Describes a wait status: "exited with 3", "killed by SIGKILL".
std::string describe_exit(int status);

}  // namespace orch::orchestrator
