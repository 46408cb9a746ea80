// control_client: the CLI's side of the control socket (control_socket.hpp): finds a running
// `serve` by its deployment file, by its socket path, or as the only one running, then asks it
// newline-delimited JSON requests, one answer line each, with a timeout.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::control {

// The socket of the server to ask: `socket` when given; else the registered server of
// `deployment` (compared as canonical paths); else the only registered server. Errors:
// "not_found" (none, or several without a choice: the message lists them and says how to
// choose), and those of list_registrations.
result<std::string> find_server_socket(const std::optional<std::string>& deployment,
                                       const std::optional<std::string>& socket);

class control_client {
 public:
  // Errors: "not_found" (no server answers there), "access_denied" (another user's socket),
  // "connect_failed".
  static result<control_client> connect(const std::string& socket_path);

  // One request, its answer. An answer that is {"error": {code, message}} comes back as that
  // error. Errors: "answer_timeout", "server_gone", "bad_response", and the server's own.
  result<nlohmann::json> ask(const nlohmann::json& request,
                             std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  explicit control_client(ipc::unique_fd fd) : fd_(std::move(fd)) {}
  ipc::unique_fd fd_;
  std::string pending_;  // read past the last answer's newline
};

}  // namespace orch::control
