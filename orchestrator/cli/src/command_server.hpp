// command_server: how the live subcommands (status, top, diverge, report) name the `serve` they
// ask: a deployment file, --socket, or nothing when one server runs (control_client.hpp); and,
// for status, top and diverge, --url: a serve's or a gateway's HTTP (live_http.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "orch/control/control_client.hpp"
#include "orch/support/result.hpp"

namespace orch::cli {

struct server_choice {
  std::string deployment;   // empty: not given
  std::string socket;       // empty: not given
  std::string url;          // empty: not given
  std::string secret_file;  // with --url: the fleet secret a serve host asks for
};

// Adds the optional `deployment` positional and --socket to `cmd`.
void add_server_options(CLI::App* cmd, server_choice& choice);
// Adds --url and --fleet-secret-file (the live views over HTTP, from a serve or a gateway).
void add_url_options(CLI::App* cmd, server_choice& choice);

// Where the live documents come from: the control socket, or HTTP with --url.
class live_source {
 public:
  // Connects to the chosen server; on failure prints `command`'s error with its fix and returns
  // nullopt.
  static std::optional<live_source> open(const char* command, const server_choice& choice);
  // {"get": what} over the socket, or GET /orch/<what> over HTTP.
  result<nlohmann::json> ask(const std::string& what);

 private:
  live_source() = default;
  std::optional<control::control_client> client_;
  std::string url_, host_;
  std::uint16_t port_ = 0;
  std::optional<std::string> secret_;
};

// Connects to the chosen server; on failure prints `command`'s error with its fix and returns
// nullopt.
std::optional<control::control_client> connect_to_server(const char* command,
                                                         const server_choice& choice);

// Asks one request; on failure prints it and returns nullopt.
std::optional<nlohmann::json> ask_server(const char* command, control::control_client& client,
                                         const nlohmann::json& request);

// Connects, asks {"get": what}, and prints the answer: as indented JSON with `json_out`, else as
// `as_text` writes it (`as_fleet_text` a gateway's document). Returns the answer, or nullopt
// after printing why there is none.
std::optional<nlohmann::json> show_document(
    const char* command, const server_choice& choice, const char* what, bool json_out,
    const std::function<std::string(const nlohmann::json&)>& as_text,
    const std::function<std::string(const nlohmann::json&)>& as_fleet_text);

}  // namespace orch::cli
