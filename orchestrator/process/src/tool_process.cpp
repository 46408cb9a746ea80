#include "orch/process/tool_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "orch/process/child_process.hpp"
#include "orch/process/errc.hpp"

extern char** environ;

namespace orch::process {
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
  if (command.argv.empty()) return error{process_errc::not_found, "no command to run"};
  const fs::path path = find_executable(command.argv.front());
  if (path.empty()) {
    return error{process_errc::not_found,
                 command.argv.front() + " is not on PATH or cannot be executed"};
  }
  int pipe_fds[2] = {-1, -1};
  if (command.output_fd < 0 && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return error{process_errc::spawn_failed, std::string("pipe: ") + std::strerror(errno)};
  }
  spawn_request request;
  request.executable = path.string();
  request.args.assign(command.argv.begin() + 1, command.argv.end());
  request.envp = environment_of(command);
  request.output_fd = command.output_fd >= 0 ? command.output_fd : pipe_fds[1];
  request.working_directory = command.working_directory.string();
  auto spawned = spawn_process(request);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (!spawned) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    return spawned.err();
  }
  const pid_t pid = *spawned;

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
    if (const auto status = try_reap_process(pid)) {
      out.status = *status;
      break;
    }
    if (command.timeout.count() > 0 && clock::now() >= deadline) {
      out.status = reap_process(pid, std::chrono::milliseconds(0));  // its whole group
      out.timed_out = true;
      break;
    }
  }
  if (pipe_fds[0] >= 0) {
    char buffer[4096];
    ssize_t n = 0;
    ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) capture(buffer, n);
    ::close(pipe_fds[0]);
  }
  return out;
}

}  // namespace orch::process
