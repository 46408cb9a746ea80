#include "orch/process/child_process_launcher.hpp"

#include <signal.h>

namespace orch::process {

result<pid_t> child_process_launcher::spawn(const spawn_request& request) {
  return spawn_process(request);
}

void child_process_launcher::signal_group(pid_t pid, int signal) noexcept {
  if (pid > 0) ::kill(-pid, signal);
}

int child_process_launcher::reap(pid_t pid, std::chrono::milliseconds grace) noexcept {
  return reap_process(pid, grace);
}

std::optional<int> child_process_launcher::try_reap(pid_t pid) noexcept {
  return try_reap_process(pid);
}

result<ipc::process_identity> child_process_launcher::identity(pid_t pid) {
  return ipc::read_process_identity(pid);
}

}  // namespace orch::process
