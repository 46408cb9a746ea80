#include "orch/gateway/gateway_server.hpp"

#include <future>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "orch/gateway/errc.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/serve/fleet_auth.hpp"
#include "orch/serve/serve_files.hpp"

namespace orch::gateway {

namespace {

// The official frontend installed beside comfy-orch (install_layout.hpp), when it is there, as
// serve finds it without --front-end-root.
std::optional<std::filesystem::path> installed_frontend() {
  std::error_code ec;
  if (const auto dir = process::this_install_layout().frontend_directory;
      std::filesystem::is_regular_file(dir / "index.html", ec))
    return dir;
  spdlog::warn("gateway: no frontend is installed beside comfy-orch: GET / says how to get it");
  return std::nullopt;
}

}  // namespace

result<std::unique_ptr<gateway_server>> gateway_server::prepare(fleet_config config,
                                                                serve::http_limits limits) {
  std::optional<std::string> secret;
  if (config.secret_file) {
    // Read with the hosts' own checks (mode 600, 32 to 4096 printable bytes): what the gateway
    // sends is what `serve --fleet-secret-file` would accept, and nothing a header cannot carry.
    auto read = serve::fleet_secret::read(*config.secret_file);
    if (!read)
      return error{gateway_errc::invalid_config,
                   config.file.string() + ": [gateway] secret_file: " + read.err().message +
                       "\n  (the same file every host's `serve --fleet-secret-file` reads)"};
    secret = read->value();
  }
  auto state = gateway_state::open(config.state_file);
  if (!state) return state.err();
  auto stored = (*state)->load();
  if (!stored) return stored.err();
  return std::unique_ptr<gateway_server>(new gateway_server(std::move(config), std::move(limits),
                                                            std::move(secret), std::move(*state),
                                                            std::move(*stored)));
}

gateway_server::gateway_server(fleet_config config, serve::http_limits limits,
                               std::optional<std::string> secret,
                               std::unique_ptr<gateway_state> state, stored_state stored)
    : config_(std::move(config)),
      limits_(std::move(limits)),
      secret_(std::move(secret)),
      state_(std::move(state)),
      stored_(std::move(stored)) {}

gateway_server::~gateway_server() {
  stop();
}

result<std::uint16_t> gateway_server::start() {
  // The gateway's file store and the frontend's user directory, made before anything starts as
  // serve makes its directories: one the gateway cannot make stops it at once, naming its key,
  // rather than losing an upload, an output or a user's settings later.
  const std::pair<const char*, std::filesystem::path> directories[] = {
      {"input_directory", config_.input_directory},
      {"output_directory", config_.output_directory},
      {"temp_directory", config_.temp_directory},
      {"user_directory", config_.user_directory / "default"}};
  for (const auto& [key, dir] : directories) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir, ec))
      return error{gateway_errc::invalid_config,
                   config_.file.string() + ": [gateway] " + key + ": cannot make " + dir.string() +
                       (ec ? ": " + ec.message() : std::string(": not a directory")) +
                       "\n  fix: point " + key + " at a directory the gateway may create and write"};
  }
  started_ = true;
  work_.emplace(io_.get_executor());
  io_thread_ = std::thread([this] { io_.run(); });
  gateway_options options;
  options.secret = secret_;
  options.history_size = config_.history_size;
  options.fingerprint = config_.fingerprint;
  options.round_robin = config_.round_robin;
  // The gateway's clock counts milliseconds: SwarmUI's 10 s of pressure a waiting prompt.
  options.policy.pressure_window = config_.pressure_window_ms;
  options.policy.ticks_per_waiting_prompt = 10'000;
  options.frontend_root = installed_frontend();
  options.user_directory = config_.user_directory;
  // What the WebSocket's feature_flags announce too (http_server's rule for an upload).
  options.max_upload = limits_.body_rule_for ? limits_.body_rule_for("POST", "/upload/image").limit
                                             : limits_.max_body;
  options.files = {config_.input_directory, config_.output_directory, config_.temp_directory,
                   config_.user_directory};
  options.max_output_file_bytes = config_.max_output_file_bytes;
  options.max_outputs_per_prompt = config_.max_outputs_per_prompt;
  http_ = std::make_unique<serve::http_server>(
      io_, limits_, [this](const serve::http_request& r) { return routes_.answer(r); },
      [this](const serve::http_request& r) { return routes_.at_once(r); },
      [this](const std::string& sid) { return api_->greeting(sid); });
  api_ = std::make_unique<gateway_api>(io_, *http_, std::move(options), std::move(state_), stored_);
  stored_ = {};  // the queue holds it now
  api_->add_routes(routes_);
  auto port = http_->listen(config_.listen, config_.port);
  if (!port)
    return error{gateway_errc::listen_failed,
                 port.err().message +
                     "\n  fix: choose another --port (0 picks a free one) or --listen address"};
  if (config_.ray)
    source_ = std::make_unique<ray_host_source>(*config_.ray, config_.secret_file);
  else
    source_ = std::make_unique<static_host_source>(config_.hosts);
  boost::asio::post(io_, [this] { api_->start(); });
  if (auto started = source_->start(io_, [this](const host_event& e) { api_->on_host_event(e); });
      !started)
    return started.err();
  return *port;
}

void gateway_server::stop() {
  if (stopped_ || !started_) return;
  stopped_ = true;
  if (source_) source_->stop();
  http_->stop();  // the API thread is joined: no route runs from here on
  std::promise<void> done;
  boost::asio::post(io_, [&] {
    api_->stop();
    done.set_value();
  });
  done.get_future().wait();
  work_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
  api_.reset();
  http_.reset();
}

}  // namespace orch::gateway
