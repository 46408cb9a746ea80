// command_server: how the live subcommands (status, top, diverge, report) name the `serve` they
// ask: a deployment file, --socket, or nothing when one server runs (control_client.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "control_client.hpp"

namespace orch::cli {

struct server_choice {
  std::string deployment;  // empty: not given
  std::string socket;      // empty: not given
};

// Adds the optional `deployment` positional and --socket to `cmd`.
void add_server_options(CLI::App* cmd, server_choice& choice);

// Connects to the chosen server; on failure prints `command`'s error with its fix and returns
// nullopt.
std::optional<orchestrator::control_client> connect_to_server(const char* command,
                                                              const server_choice& choice);

// Asks one request; on failure prints it and returns nullopt.
std::optional<nlohmann::json> ask_server(const char* command,
                                         orchestrator::control_client& client,
                                         const nlohmann::json& request);

}  // namespace orch::cli
