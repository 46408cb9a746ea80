#include "orch/gateway/gateway_server.hpp"

#include <future>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "orch/gateway/errc.hpp"
#include "orch/serve/fleet_auth.hpp"
#include "orch/serve/serve_files.hpp"

namespace orch::gateway {

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
  return std::unique_ptr<gateway_server>(
      new gateway_server(std::move(config), std::move(limits), std::move(secret)));
}

gateway_server::gateway_server(fleet_config config, serve::http_limits limits,
                               std::optional<std::string> secret)
    : config_(std::move(config)), limits_(std::move(limits)), secret_(std::move(secret)) {}

gateway_server::~gateway_server() {
  stop();
}

result<std::uint16_t> gateway_server::start() {
  // The gateway's file store, made before anything starts, as serve makes its directories.
  if (auto made = serve::create_file_directories({config_.input_directory, config_.output_directory,
                                                  config_.temp_directory, config_.user_directory});
      !made)
    return error{gateway_errc::invalid_config,
                 config_.file.string() + ": [gateway]: " + made.err().message +
                     "\n  fix: create it, or point [gateway] input_directory, output_directory or "
                     "temp_directory at a directory the gateway can write"};
  started_ = true;
  work_.emplace(io_.get_executor());
  io_thread_ = std::thread([this] { io_.run(); });
  gateway_options options;
  options.secret = secret_;
  options.history_size = config_.history_size;
  options.fingerprint = config_.fingerprint;
  options.files = {config_.input_directory, config_.output_directory, config_.temp_directory,
                   config_.user_directory};
  options.max_output_file_bytes = config_.max_output_file_bytes;
  options.max_outputs_per_prompt = config_.max_outputs_per_prompt;
  http_ = std::make_unique<serve::http_server>(
      io_, limits_, [this](const serve::http_request& r) { return routes_.answer(r); },
      [this](const serve::http_request& r) { return routes_.at_once(r); },
      [this](const std::string& sid) { return api_->greeting(sid); });
  api_ = std::make_unique<gateway_api>(io_, *http_, std::move(options));
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
