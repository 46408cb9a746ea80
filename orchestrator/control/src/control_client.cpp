#include "orch/control/control_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "orch/control/control_directory.hpp"
#include "orch/control/control_socket.hpp"
#include "orch/control/errc.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::control {
namespace {

using nlohmann::json;
constexpr std::size_t max_answer = std::size_t{256} << 20;  // a timeline of a long run is MBs

std::string listing(const std::vector<server_registration>& servers) {
  std::string out;
  for (const auto& s : servers)
    out += "\n  pid " + std::to_string(s.pid) + "  " + s.deployment + "  --socket " + s.socket;
  return out;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  const auto c = std::filesystem::canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace

result<std::string> find_server_socket(const std::optional<std::string>& deployment,
                                       const std::optional<std::string>& socket) {
  if (socket) return *socket;
  auto servers = list_registrations();
  if (!servers) return servers.err();
  std::vector<server_registration> chosen;
  const std::string wanted = deployment ? canonical_or_same(*deployment) : std::string();
  for (const auto& s : *servers)
    if (!deployment || s.deployment == wanted) chosen.push_back(s);
  // One that answers is preferred to one that does not (stopped, or its pid reused).
  if (std::count_if(chosen.begin(), chosen.end(), [](const auto& s) { return s.answering; }) > 0)
    chosen.erase(
        std::remove_if(chosen.begin(), chosen.end(), [](const auto& s) { return !s.answering; }),
        chosen.end());
  if (chosen.size() == 1) return chosen.front().socket;
  if (chosen.empty()) {
    return error{control_errc::not_found,
                 (deployment ? "no running `comfy-orch serve " + *deployment + "`"
                             : std::string("no running `comfy-orch serve`")) +
                     " found in " + control_directory_path().string() +
                     (servers->empty() ? std::string() : "; running:" + listing(*servers)) +
                     "\n  fix: start it, or name its socket with --socket (`comfy-orch ls` lists "
                     "the servers)"};
  }
  return error{control_errc::not_found,
               std::to_string(chosen.size()) + " servers match:" + listing(chosen) +
                   "\n  fix: name the deployment file, or choose one with --socket"};
}

result<control_client> control_client::connect(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path)
    return error{control_errc::not_found, "socket path too long: " + socket_path};
  addr.sun_family = AF_UNIX;
  socket_path.copy(addr.sun_path, socket_path.size());
  // Non-blocking: a server whose io thread stalls with a full backlog refuses at once
  // (EAGAIN) rather than holding the command forever.
  ipc::unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return error{control_errc::connect_failed, std::string("socket: ") + std::strerror(errno)};
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    const std::string why = socket_path + ": " + std::strerror(e);
    if (e == ENOENT || e == ECONNREFUSED)
      return error{control_errc::not_found,
                   "no server answers at " + why + " (`comfy-orch ls` lists the servers)"};
    if (e == EACCES || e == EPERM)
      return error{control_errc::access_denied, why + ": the socket belongs to another user"};
    if (e == EAGAIN)
      return error{control_errc::connect_failed, why + ": the server is not accepting connections"};
    return error{control_errc::connect_failed, why};
  }
  // The server is this user's too: one of another user's could say anything.
  if (const long uid = peer_uid(fd.get()); uid != static_cast<long>(::geteuid())) {
    return error{control_errc::access_denied, socket_path + ": the server there runs as uid " +
                                                  std::to_string(uid) +
                                                  ", not as this user; it is not asked"};
  }
  return control_client(std::move(fd));
}

result<json> control_client::ask(const json& request, std::chrono::milliseconds timeout) {
  const std::string line = request.dump(-1, ' ', false, json::error_handler_t::replace) + '\n';
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd_.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {  // the socket is non-blocking: wait until it takes more
      pollfd p{fd_.get(), POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) > 0) continue;
    }
    if (n <= 0) {
      // A server that refused this connection said why before it closed: read that instead.
      timeout = std::min(timeout, std::chrono::milliseconds(1000));
      break;
    }
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t newline;
  while ((newline = pending_.find('\n')) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return error{control_errc::answer_timeout, "the server did not answer in time"};
    pollfd p{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[65536];
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0)
      return error{control_errc::server_gone, "the server closed the connection without an answer"};
    pending_.append(buffer, static_cast<std::size_t>(n));
    if (pending_.size() > max_answer)
      return error{control_errc::bad_response, "the answer is too large"};
  }
  const json answer = json::parse(pending_.substr(0, newline), nullptr, false);
  pending_.erase(0, newline + 1);
  if (!answer.is_object())
    return error{control_errc::bad_response, "the server's answer is not JSON"};
  if (answer.contains("error") && answer["error"].is_object()) {
    return error{text_field(answer["error"], "code"), text_field(answer["error"], "message")};
  }
  return answer;
}

}  // namespace orch::control
