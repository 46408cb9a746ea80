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

#include "adopted_children.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/orchestrator/errc.hpp"

namespace orch::orchestrator {
namespace {

// What the child writes on the status pipe when it cannot exec: where it failed and the errno.
struct exec_report {
  int stage = 0;
  int error = 0;
};
constexpr int stage_fds = 1;   // moving the inherited fds into place
constexpr int stage_exec = 2;  // execve itself
constexpr int stage_cwd = 3;   // chdir into the working directory

// Async-signal-safe: runs in the child between fork and exec.
[[noreturn]] void report_and_exit(int status_fd, int stage, int code) noexcept {
  const exec_report r{stage, errno};
  ssize_t n;
  do {
    n = ::write(status_fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  ::_exit(code);
}

}  // namespace

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
  const bool has_token = request.token_fd >= 0;
  const int first_closed = has_token ? worker_token_fd + 1 : worker_fd_socket + 1;

  // The exec status pipe: close-on-exec, so a successful execve closes the child's write end and
  // the parent reads end of file; a failure writes an exec_report first.
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    return error{runtime_errc::spawn_failed, std::string("pipe failed: ") + std::strerror(errno)};
  }
  ipc::unique_fd status_read(status_pipe[0]), status_write(status_pipe[1]);
  const int status_source = status_write.get();

  pid_t pid;
  {
    const auto held = hold_children();
    pid = ::fork();
    if (pid > 0) note_spawned(pid);
  }
  if (pid < 0)
    return error{runtime_errc::spawn_failed, std::string("fork failed: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the host died before prctl took effect
    // Every source fd moves above the target numbers first, so the dup2s cannot clobber one.
    const int status = ::fcntl(status_source, F_DUPFD_CLOEXEC, 10);
    if (status < 0) ::_exit(125);
    const int channel = ::fcntl(request.channel_fd, F_DUPFD, 10);
    const int fds = ::fcntl(request.fd_socket, F_DUPFD, 10);
    const int token = has_token ? ::fcntl(request.token_fd, F_DUPFD, 10) : -1;
    if (request.output_fd >= 0) {
      const int out = ::fcntl(request.output_fd, F_DUPFD, 10);
      const int null = ::open("/dev/null", O_RDONLY);
      if (out < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
        report_and_exit(status, stage_fds, 125);
    }
    if (channel < 0 || fds < 0 || (has_token && token < 0) ||
        ::dup2(channel, worker_channel_fd) < 0 || ::dup2(fds, worker_fd_socket) < 0 ||
        (has_token && ::dup2(token, worker_token_fd) < 0)) {
      report_and_exit(status, stage_fds, 125);
    }
    // Everything else is closed; the status pipe (above them all) closes itself at exec.
    ::syscall(SYS_close_range, first_closed, status - 1, 0);
    ::syscall(SYS_close_range, status + 1, ~0u, 0);
    if (!request.working_directory.empty() && ::chdir(request.working_directory.c_str()) != 0) {
      report_and_exit(status, stage_cwd, 125);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    report_and_exit(status, stage_exec, 127);
  }
  ::setpgid(pid, pid);  // also from the parent: no window where a group signal misses the child
  status_write = ipc::unique_fd();

  exec_report report;
  ssize_t n;
  do {
    n = ::read(status_read.get(), &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof report)) return pid;  // end of file: the child exec'd
  (void)reap_worker(pid, std::chrono::seconds(2));  // it _exits right after its report
  const std::string why = std::strerror(report.error);
  if (report.stage == stage_exec) {
    return error{runtime_errc::exec_failed, "cannot execute " + request.executable + ": " + why};
  }
  if (report.stage == stage_cwd) {
    return error{runtime_errc::exec_failed, "cannot enter " + request.working_directory +
                                                " to run " + request.executable + ": " + why};
  }
  return error{runtime_errc::exec_failed,
               "cannot hand the inherited fds to " + request.executable + ": " + why};
}

int reap_worker(pid_t pid, std::chrono::milliseconds grace) noexcept {
  if (pid <= 0) return 0;
  const auto end = std::chrono::steady_clock::now() + grace;
  int status = 0;
  const auto reaped = [&] {
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        status = 0;
        break;
      }
    }
    forget_spawned(pid);
    return status;
  };
  while (true) {
    // Looked at without reaping (WNOWAIT): while the leader is an unreaped zombie its pid, and
    // so its group id, cannot be reused, so the group kill below reaches only what the worker
    // left behind (a helper its pack forked), never a stranger.
    siginfo_t info{};
    const int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) {
      ::kill(-pid, SIGKILL);
      return reaped();
    }
    if (r < 0 && errno != EINTR) return 0;
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  return reaped();
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
