#include "orch/process/leftover_processes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "orch/ipc/process_identity.hpp"

namespace orch::process {

namespace {

// Whether /proc/<pid>/environ holds `needle` as the start of one of its entries.
bool environ_marked(const char* pid, std::string_view needle) {
  const std::string path = std::string("/proc/") + pid + "/environ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone, or another user's
  std::string env;
  std::array<char, 4096> buffer{};
  ssize_t n;
  // An environment is at most a few MiB (ARG_MAX); read no more than that.
  while (env.size() < (std::size_t{4} << 20) && (n = ::read(fd, buffer.data(), buffer.size())) > 0)
    env.append(buffer.data(), static_cast<std::size_t>(n));
  ::close(fd);
  for (std::size_t at = 0; at < env.size();) {
    const auto end = env.find('\0', at);
    const std::string_view entry(env.data() + at,
                                 (end == std::string::npos ? env.size() : end) - at);
    if (entry.substr(0, needle.size()) == needle) return true;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::string new_host_instance() {
  static const std::string process = [] {
    const auto me = ipc::read_process_identity(::getpid());
    return std::to_string(::getpid()) + "." + std::to_string(me ? me->start_time : 0);
  }();
  static std::atomic<unsigned> next{0};
  return process + "." + std::to_string(next++);
}

std::size_t kill_marked_processes(const std::string& prefix) {
  const std::string needle = std::string(worker_instance_variable) + "=" + prefix;
  const std::string self = std::to_string(::getpid());
  std::size_t killed = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9' || self == e->d_name) continue;
    if (!environ_marked(e->d_name, needle)) continue;
    if (::kill(static_cast<pid_t>(std::atoi(e->d_name)), SIGKILL) == 0) ++killed;
  }
  ::closedir(proc);
  return killed;
}

}  // namespace orch::process
