#include "orch/runtime/plugin_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "orch/ipc/unique_fd.hpp"
#include "orch/process/child_process.hpp"
#include "orch/process/worker_environment.hpp"
#include "orch/runtime/errc.hpp"

namespace orch::runtime {
namespace {

// A plugin list is a few hundred bytes per plugin: anything near this is not one.
constexpr std::size_t max_answer = 4u << 20;

std::string joined(const std::vector<std::filesystem::path>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ":") + d.string();
  return out;
}

// Reads until end of file, the size cap or the deadline. False when the deadline passed.
bool read_answer(int fd, std::chrono::steady_clock::time_point deadline, std::string& out) {
  char buffer[4096];
  while (out.size() < max_answer) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    if (ready < 0) return true;  // poll itself failed: what was read is all there is
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

result<std::vector<plugins::plugin_entry>> probe_plugins(
    const std::string& worker_executable, const std::vector<std::filesystem::path>& dirs,
    std::chrono::milliseconds timeout) {
  const std::string what = "reading the plugins in " + joined(dirs);
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return error{runtime_errc::probe_failed, what + ": pipe failed: " + std::strerror(errno)};
  }
  ipc::unique_fd read_end(ends[0]);
  ipc::unique_fd write_end(ends[1]);
  process::spawn_request request;
  request.executable = worker_executable;
  request.args = {"--probe-plugins", std::to_string(process::worker_channel_fd)};
  for (const auto& d : dirs) request.args.push_back(d.string());
  request.envp = process::to_envp(process::current_environment());
  request.fds = {{write_end.get(), process::worker_channel_fd}};
  auto pid = process::spawn_process(request);
  if (!pid) return error{runtime_errc::probe_failed, what + ": " + pid.err().message};
  write_end = ipc::unique_fd();  // the child holds the only write end: its exit is end of file

  std::string answer;
  const bool in_time = read_answer(read_end.get(), std::chrono::steady_clock::now() + timeout,
                                   answer);
  const int status = process::reap_process(*pid, in_time ? timeout : std::chrono::milliseconds(0));
  if (!in_time) {
    return error{runtime_errc::probe_failed,
                 what + ": no answer within " + std::to_string(timeout.count()) +
                     " ms (a plugin's constructor hangs?); the probe was killed"};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return error{runtime_errc::probe_failed, what + ": the probe " +
                                                 process::describe_exit(status) +
                                                 " (a plugin's constructor crashed?)"};
  }
  const auto j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  auto entries = plugins::plugins_from_json(j);
  if (!entries) return error{runtime_errc::probe_failed, what + ": " + entries.err().message};
  return entries;
}

}  // namespace orch::runtime
