#include "command_server.hpp"

#include <iostream>

namespace orch::cli {

void add_server_options(CLI::App* cmd, server_choice& choice) {
  cmd->add_option("deployment", choice.deployment,
                  "The deployment file a running `comfy-orch serve` was started with (not needed "
                  "when only one runs)");
  cmd->add_option("--socket", choice.socket,
                  "The server's control socket (`comfy-orch ls` lists them)");
}

std::optional<control::control_client> connect_to_server(const char* command,
                                                         const server_choice& choice) {
  auto socket = control::find_server_socket(
      choice.deployment.empty() ? std::nullopt : std::optional<std::string>(choice.deployment),
      choice.socket.empty() ? std::nullopt : std::optional<std::string>(choice.socket));
  if (!socket) {
    std::cerr << "comfy-orch " << command << ": " << socket.err().message << '\n';
    return std::nullopt;
  }
  auto client = control::control_client::connect(*socket);
  if (!client) {
    std::cerr << "comfy-orch " << command << ": " << client.err().message << '\n';
    return std::nullopt;
  }
  return std::move(*client);
}

std::optional<nlohmann::json> ask_server(const char* command, control::control_client& client,
                                         const nlohmann::json& request) {
  auto answer = client.ask(request);
  if (!answer) {
    std::cerr << "comfy-orch " << command << ": " << answer.err().message << " ("
              << answer.err().code << ")\n";
    return std::nullopt;
  }
  return std::move(*answer);
}

std::optional<nlohmann::json> show_document(
    const char* command, const server_choice& choice, const char* what, bool json_out,
    const std::function<std::string(const nlohmann::json&)>& as_text) {
  auto client = connect_to_server(command, choice);
  if (!client) return std::nullopt;
  auto answer = ask_server(command, *client, {{"get", what}});
  if (!answer) return std::nullopt;
  if (json_out) {
    std::cout << answer->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::cout << as_text(*answer);
  }
  return answer;
}

}  // namespace orch::cli
