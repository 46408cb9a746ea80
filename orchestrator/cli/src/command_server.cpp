#include "command_server.hpp"

#include <iostream>

#include "live_http.hpp"
#include "orch/live/fleet_text.hpp"

namespace orch::cli {

void add_server_options(CLI::App* cmd, server_choice& choice) {
  cmd->add_option("deployment", choice.deployment,
                  "The deployment file a running `comfy-orch serve` was started with (not needed "
                  "when only one runs)");
  cmd->add_option("--socket", choice.socket,
                  "The server's control socket (`comfy-orch ls` lists them)");
}

void add_url_options(CLI::App* cmd, server_choice& choice) {
  cmd->add_option("--url", choice.url,
                  "Read the live views over HTTP from a `comfy-orch serve` or a `comfy-orch "
                  "gateway` at http://HOST:PORT (a gateway: every host's, labelled by host)");
  cmd->add_option("--fleet-secret-file", choice.secret_file,
                  "With --url at a fleet host started with --fleet-secret-file: its secret");
}

std::optional<live_source> live_source::open(const char* command, const server_choice& choice) {
  live_source source;
  if (choice.url.empty()) {
    if (!choice.secret_file.empty()) {
      std::cerr << "comfy-orch " << command
                << ": --fleet-secret-file goes with --url; the control socket needs none\n";
      return std::nullopt;
    }
    source.client_ = connect_to_server(command, choice);
    if (!source.client_) return std::nullopt;
    return source;
  }
  if (!choice.socket.empty() || !choice.deployment.empty()) {
    std::cerr << "comfy-orch " << command
              << ": --url names the server over HTTP; give it without a deployment or --socket\n";
    return std::nullopt;
  }
  auto url = parse_live_url(choice.url);
  if (!url) {
    std::cerr << "comfy-orch " << command << ": " << url.err().message << '\n';
    return std::nullopt;
  }
  source.url_ = url->url;
  source.host_ = url->host;
  source.port_ = url->port;
  if (!choice.secret_file.empty()) {
    auto secret = read_live_secret(choice.secret_file);
    if (!secret) {
      std::cerr << "comfy-orch " << command << ": " << secret.err().message << '\n';
      return std::nullopt;
    }
    source.secret_ = std::move(*secret);
  }
  return source;
}

result<nlohmann::json> live_source::ask(const std::string& what) {
  if (client_) return client_->ask({{"get", what}});
  return get_live_document({url_, host_, port_}, "/orch/" + what, secret_);
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
    const std::function<std::string(const nlohmann::json&)>& as_text,
    const std::function<std::string(const nlohmann::json&)>& as_fleet_text) {
  auto source = live_source::open(command, choice);
  if (!source) return std::nullopt;
  auto answer = source->ask(what);
  if (!answer) {
    std::cerr << "comfy-orch " << command << ": " << answer.err().message << " ("
              << answer.err().code << ")\n";
    return std::nullopt;
  }
  if (json_out) {
    std::cout << answer->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else if (live::is_fleet_document(*answer)) {
    std::cout << as_fleet_text(*answer);
  } else {
    std::cout << as_text(*answer);
  }
  return std::move(*answer);
}

}  // namespace orch::cli
