#include "tool_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "adopted_children.hpp"
#include "orch/orchestrator/errc.hpp"
#include "orch/orchestrator/worker_process.hpp"

extern char** environ;

namespace orch::orchestrator {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

constexpr std::size_t max_captured = 1u << 20;

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<std::string> environment_of(const tool_command& command) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (command.env.count(name) == 0) out.push_back(entry);
  }
  for (const auto& [name, value] : command.env) {
    if (value) out.push_back(name + "=" + *value);
  }
  return out;
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const tool_command& command, const std::string& path,
                             std::vector<char*>& argv, std::vector<char*>& envp, int out_fd,
                             pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before the flag was set
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    ::dup2(null_fd, 0);
    if (null_fd != 0) ::close(null_fd);
  }
  ::dup2(out_fd, 1);
  ::dup2(out_fd, 2);
  if (!command.working_directory.empty() && ::chdir(command.working_directory.c_str()) != 0)
    ::_exit(126);
  ::execve(path.c_str(), argv.data(), envp.data());
  ::_exit(127);
}

}  // namespace

bool tool_exit::succeeded() const {
  return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string tool_exit::describe() const {
  if (timed_out) return "timed out";
  return describe_exit(status);
}

fs::path find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return executable(name) ? fs::path(name) : fs::path();
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
    if (end > start && executable(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

result<tool_exit> run_tool(const tool_command& command) {
  if (command.argv.empty()) return error{runtime_errc::not_found, "no command to run"};
  const fs::path path = find_executable(command.argv.front());
  if (path.empty()) {
    return error{runtime_errc::not_found,
                 command.argv.front() + " is not on PATH or cannot be executed"};
  }
  int pipe_fds[2] = {-1, -1};
  if (command.output_fd < 0 && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return error{runtime_errc::spawn_failed, std::string("pipe: ") + std::strerror(errno)};
  }
  std::vector<std::string> env = environment_of(command);
  std::vector<char*> argv;
  for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string exec_path = path.string();
  const pid_t parent = ::getpid();
  pid_t pid;
  {
    const auto held = hold_children();
    pid = ::fork();
    if (pid > 0) note_spawned(pid);
  }
  if (pid < 0) {
    const int saved = errno;
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]), ::close(pipe_fds[1]);
    return error{runtime_errc::spawn_failed, std::string("fork: ") + std::strerror(saved)};
  }
  if (pid == 0) {
    exec_child(command, exec_path, argv, envp,
               command.output_fd >= 0 ? command.output_fd : pipe_fds[1], parent);
  }
  ::setpgid(pid, pid);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);

  tool_exit out;
  const auto deadline = clock::now() + command.timeout;
  auto capture = [&](const char* data, ssize_t n) {
    if (n > 0 && out.output.size() < max_captured) {
      out.output.append(data, std::min<std::size_t>(static_cast<std::size_t>(n),
                                                    max_captured - out.output.size()));
    }
  };
  for (;;) {
    if (pipe_fds[0] >= 0) {
      pollfd p{pipe_fds[0], POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
        capture(buffer, n);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          ::close(pipe_fds[0]);  // the tool closed its end: only its exit is left
          pipe_fds[0] = -1;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const pid_t waited = ::waitpid(pid, &out.status, WNOHANG);
    if (waited == pid || (waited < 0 && errno != EINTR)) break;  // < 0: reaped elsewhere
    if (command.timeout.count() > 0 && clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);  // the group: the child is not reaped yet, so its id is its own
      ::waitpid(pid, &out.status, 0);
      out.timed_out = true;
      break;
    }
  }
  forget_spawned(pid);
  if (pipe_fds[0] >= 0) {
    char buffer[4096];
    ssize_t n = 0;
    ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) capture(buffer, n);
    ::close(pipe_fds[0]);
  }
  return out;
}

}  // namespace orch::orchestrator
