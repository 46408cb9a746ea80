#include "orch/control/control_directory.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "orch/control/errc.hpp"
#include "orch/support/errno_error.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

error unusable(const fs::path& dir, const std::string& what, const std::string& fix) {
  return {control_errc::directory_unusable,
          "control directory " + dir.string() + ": " + what + "\n  fix: " + fix};
}

bool pid_runs(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

bool socket_answers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::optional<server_registration> read_registration(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer()) return std::nullopt;
  server_registration r;
  r.pid = j["pid"].get<pid_t>();
  r.deployment = text_field(j, "deployment");
  r.socket = text_field(j, "socket");
  r.http = text_field(j, "http");
  r.version = text_field(j, "version");
  if (j.contains("started_unix_ms") && j["started_unix_ms"].is_number_integer())
    r.started_unix_ms = j["started_unix_ms"].get<long long>();
  return r;
}

}  // namespace

fs::path control_directory_path() {
  const fs::path fallback = fs::path("/tmp") / ("comfy-orch-" + std::to_string(::geteuid()));
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime == nullptr || runtime[0] != '/') return fallback;
  const fs::path dir = fs::path(runtime) / "comfy-orch";
  // The longest socket a server puts there, "<pid>.sock" with the largest pid Linux gives
  // (4194304, pid_max's ceiling), must fit in a Unix socket's address.
  constexpr std::size_t longest_name = sizeof("/4194304.sock") - 1;
  if (dir.string().size() + longest_name >= sizeof(sockaddr_un{}.sun_path)) return fallback;
  return dir;
}

result<fs::path> open_control_directory() {
  const fs::path dir = control_directory_path();
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && runtime[0] == '/' && !dir.string().starts_with(runtime)) {
    spdlog::info("XDG_RUNTIME_DIR ({}) is too long for a Unix socket's path ({} bytes at most): "
                 "the control socket is in {}",
                 runtime, sizeof(sockaddr_un{}.sun_path) - 1, dir.string());
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error(control_errc::directory_unusable, "mkdir(" + dir.string() + ")");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return errno_error(control_errc::directory_unusable, "lstat(" + dir.string() + ")");
  }
  if (!S_ISDIR(st.st_mode)) {
    return unusable(dir, "it is not a directory (a symlink or a file is refused)",
                    "remove it, or set XDG_RUNTIME_DIR to a directory of your own");
  }
  if (st.st_uid != ::geteuid()) {
    return unusable(dir,
                    "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
                        std::to_string(::geteuid()) + "), who could not trust its sockets",
                    "set XDG_RUNTIME_DIR to a directory of your own");
  }
  if ((st.st_mode & 077) != 0) {
    return unusable(dir,
                    "it is open to other users (mode " + std::to_string((st.st_mode >> 6) & 7) +
                        std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) +
                        ")",
                    "chmod 700 " + dir.string());
  }
  return dir;
}

status write_registration(const fs::path& dir, const server_registration& r) {
  const json j = {{"pid", r.pid},         {"deployment", r.deployment},
                  {"socket", r.socket},   {"http", r.http},
                  {"version", r.version}, {"started_unix_ms", r.started_unix_ms}};
  const fs::path file = dir / (std::to_string(r.pid) + ".json");
  const fs::path temporary = dir / (std::to_string(r.pid) + ".json.tmp");
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    if (!out.flush())
      return errno_error(control_errc::file_io_failed, "write " + temporary.string());
  }
  if (::rename(temporary.c_str(), file.c_str()) != 0) {
    return errno_error(control_errc::file_io_failed, "rename " + temporary.string());
  }
  return ok_status();
}

void remove_registration(const fs::path& dir, pid_t pid) {
  std::error_code ec;
  fs::remove(dir / (std::to_string(pid) + ".json"), ec);
  fs::remove(dir / (std::to_string(pid) + ".sock"), ec);
}

result<std::vector<server_registration>> list_registrations() {
  auto dir = open_control_directory();  // registrations in a directory not ours are not trusted
  if (!dir) return dir.err();
  std::vector<server_registration> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(*dir, ec)) {
    if (entry.path().extension() != ".json" || !entry.is_regular_file(ec)) continue;
    auto r = read_registration(entry.path());
    if (!r || entry.path().stem() != std::to_string(r->pid)) continue;
    if (!pid_runs(r->pid)) {
      remove_registration(*dir, r->pid);
      continue;
    }
    r->answering = socket_answers(r->socket);
    out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace orch::control
