#include "orch/process/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "orch/ipc/unique_fd.hpp"
#include "orch/process/adopted_children.hpp"
#include "orch/process/errc.hpp"

namespace orch::process {
namespace {

// What the child writes on the status pipe when it cannot exec: where it failed and the errno.
struct exec_report {
  int stage = 0;
  int error = 0;
};
constexpr int stage_fds = 1;   // moving the inherited fds into place
constexpr int stage_exec = 2;  // execve itself
constexpr int stage_cwd = 3;   // chdir into the working directory

// Where the child moves each source fd before placing it at its target (3 to 9).
constexpr int moved_fd_floor = 10;

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

result<pid_t> spawn_process(const spawn_request& request) {
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
  int first_closed = 3;  // above every target: what the child closes
  for (const auto& fd : request.fds) {
    if (fd.target < 3 || fd.target >= moved_fd_floor || fd.source < 0)
      return error{process_errc::spawn_failed,
                   "cannot hand fd " + std::to_string(fd.source) + " to " + request.executable +
                       " as fd " + std::to_string(fd.target) + " (3 to 9 only)"};
    first_closed = std::max(first_closed, fd.target + 1);
  }
  std::vector<int> moved(request.fds.size(), -1);

  // The exec status pipe: close-on-exec, so a successful execve closes the child's write end and
  // the parent reads end of file; a failure writes an exec_report first.
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    return error{process_errc::spawn_failed, std::string("pipe failed: ") + std::strerror(errno)};
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
    return error{process_errc::spawn_failed, std::string("fork failed: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the host died before prctl took effect
    // Every source fd moves above the target numbers first, so the dup2s cannot clobber one.
    const int status = ::fcntl(status_source, F_DUPFD_CLOEXEC, moved_fd_floor);
    if (status < 0) ::_exit(125);
    for (std::size_t i = 0; i < request.fds.size(); ++i) {
      moved[i] = ::fcntl(request.fds[i].source, F_DUPFD, moved_fd_floor);
      if (moved[i] < 0) report_and_exit(status, stage_fds, 125);
    }
    if (request.output_fd >= 0) {
      const int out = ::fcntl(request.output_fd, F_DUPFD, moved_fd_floor);
      const int null = ::open("/dev/null", O_RDONLY);
      if (out < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
        report_and_exit(status, stage_fds, 125);
    }
    for (std::size_t i = 0; i < request.fds.size(); ++i)
      if (::dup2(moved[i], request.fds[i].target) < 0) report_and_exit(status, stage_fds, 125);
    // Everything else is closed; the status pipe (above them all) closes itself at exec.
    for (int fd = 3; fd < first_closed; ++fd) {  // a number between the targets
      bool target = false;
      for (const auto& f : request.fds) target = target || f.target == fd;
      if (!target) ::close(fd);
    }
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
  (void)reap_process(pid, std::chrono::seconds(2));  // it _exits right after its report
  const std::string why = std::strerror(report.error);
  if (report.stage == stage_exec) {
    return error{process_errc::exec_failed, "cannot execute " + request.executable + ": " + why};
  }
  if (report.stage == stage_cwd) {
    return error{process_errc::exec_failed, "cannot enter " + request.working_directory +
                                                " to run " + request.executable + ": " + why};
  }
  return error{process_errc::exec_failed,
               "cannot hand the inherited fds to " + request.executable + ": " + why};
}

namespace {

// Reaps `pid`, which has ended or been SIGKILLed; its wait status.
int reap_ended(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      status = 0;
      break;
    }
  }
  forget_spawned(pid);
  return status;
}

}  // namespace

std::optional<int> try_reap_process(pid_t pid) noexcept {
  if (pid <= 0) return 0;
  // Looked at without reaping (WNOWAIT): while the leader is an unreaped zombie its pid, and so
  // its group id, cannot be reused, so the group kill below reaches only what it left behind (a
  // helper it forked), never a stranger.
  siginfo_t info{};
  int r;
  do {
    r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {  // not a child of ours (any more): nothing to wait for, nothing to kill
    forget_spawned(pid);
    return 0;
  }
  if (info.si_pid != pid) return std::nullopt;  // still running
  ::kill(-pid, SIGKILL);
  return reap_ended(pid);
}

int reap_process(pid_t pid, std::chrono::milliseconds grace) noexcept {
  if (pid <= 0) return 0;
  const auto end = std::chrono::steady_clock::now() + grace;
  while (true) {
    if (auto status = try_reap_process(pid)) return *status;
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  return reap_ended(pid);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "status " + std::to_string(status);
}

}  // namespace orch::process
