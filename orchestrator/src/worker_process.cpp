#include "orch/orchestrator/worker_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace orch::orchestrator {

result<pid_t> spawn_worker(const spawn_request& request) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args{request.executable};
  args.insert(args.end(), request.args.begin(), request.args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = request.envp;
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return error{"spawn_failed", std::string("fork failed: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the host died before prctl took effect
    // Move the two ends above the target numbers first so the dup2s cannot clobber each other.
    const int channel = ::fcntl(request.channel_fd, F_DUPFD, 10);
    const int fds = ::fcntl(request.fd_socket, F_DUPFD, 10);
    if (channel < 0 || fds < 0 || ::dup2(channel, worker_channel_fd) < 0 ||
        ::dup2(fds, worker_fd_socket) < 0) {
      ::_exit(125);
    }
    ::syscall(SYS_close_range, worker_fd_socket + 1, ~0u, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no window where a group signal misses the child
  return pid;
}

int reap_worker(pid_t pid, std::chrono::milliseconds grace) noexcept {
  if (pid <= 0) return 0;
  const auto end = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return status;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "status " + std::to_string(status);
}

}  // namespace orch::orchestrator
