// command_server: how the live subcommands (status, top, diverge, report) name the `serve` they
// ask: a deployment file, --socket, or nothing when one server runs (control_client.hpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "orch/control/control_client.hpp"

namespace orch::cli {

struct server_choice {
  std::string deployment;  // empty: not given
  std::string socket;      // empty: not given
};

// Adds the optional `deployment` positional and --socket to `cmd`.
void add_server_options(CLI::App* cmd, server_choice& choice);

// Connects to the chosen server; on failure prints `command`'s error with its fix and returns
// nullopt.
std::optional<control::control_client> connect_to_server(const char* command,
                                                         const server_choice& choice);

// Asks one request; on failure prints it and returns nullopt.
std::optional<nlohmann::json> ask_server(const char* command, control::control_client& client,
                                         const nlohmann::json& request);

// Connects, asks {"get": what}, and prints the answer: as indented JSON with `json_out`, else as
// `as_text` writes it. Returns the answer, or nullopt after printing why there is none.
std::optional<nlohmann::json> show_document(
    const char* command, const server_choice& choice, const char* what, bool json_out,
    const std::function<std::string(const nlohmann::json&)>& as_text);

}  // namespace orch::cli
