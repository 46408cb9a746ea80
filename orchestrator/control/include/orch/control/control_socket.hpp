// control_socket: the local control socket of `comfy-orch serve` (docs/cli.md, "The control
// socket"), a Unix stream socket `<pid>.sock` in this user's control directory
// (control_directory.hpp), mode 0600. Each connection's peer is checked with SO_PEERCRED: a peer
// whose uid is not the server's is told so and closed, whatever the directory's permissions
// let through. The protocol is newline-delimited JSON: one request object per line, one answer
// object per line, in order, on the host's io thread. Requests are capped in size, connections
// in number, and a connection that says nothing for a minute is closed.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::control {

struct control_limits {
  long allowed_uid = static_cast<long>(::geteuid());  // the only peer uid answered
  std::size_t max_request = std::size_t{64} << 10;
  unsigned max_connections = 32;
  std::chrono::milliseconds idle_timeout{60000};
};

class control_socket {
 public:
  // Answers one request object; called on the io thread.
  using handler = std::function<nlohmann::json(const nlohmann::json& request)>;

  control_socket(boost::asio::io_context& io, handler on_request, control_limits limits = {});
  ~control_socket();  // stop()
  control_socket(const control_socket&) = delete;
  control_socket& operator=(const control_socket&) = delete;

  // Binds `path` (replacing a stale socket file there) and accepts. Not on the io thread.
  // Errors: "listen_failed" (the path and the system's reason).
  status listen(const std::filesystem::path& path);
  // Stops accepting and closes every connection. Idempotent; not on the io thread.
  void stop();

  struct state;

 private:
  std::shared_ptr<state> state_;
  bool stopped_ = false;
};

// The peer's uid of a connected Unix socket, or -1 when it cannot be read.
long peer_uid(int fd);

}  // namespace orch::control
