// child_process_launcher: the process_launcher of a running host: real children through
// child_process.hpp (fork/exec, process group, parent-death signal), signals with kill(2), and
// identities from /proc. What the supervisor does with no launcher given.
#pragma once

#include "orch/process/process_launcher.hpp"

namespace orch::process {

class child_process_launcher final : public process_launcher {
 public:
  result<pid_t> spawn(const spawn_request& request) override;
  void signal_group(pid_t pid, int signal) noexcept override;
  int reap(pid_t pid, std::chrono::milliseconds grace) noexcept override;
  std::optional<int> try_reap(pid_t pid) noexcept override;
  result<ipc::process_identity> identity(pid_t pid) override;
};

}  // namespace orch::process
