// gateway_server: the composition root of `comfy-orch gateway` (docs/fleet.md, "The gateway"),
// as serve_server is serve's. Made from a fleet_config, it owns the gateway's parts and wires
// them: its io thread, serve's HTTP and WebSocket listener (serve_http.hpp: its limits, origin
// check and WebSocket clients) over a route table of the gateway's routes (gateway_api.hpp), and
// the source of its hosts (host_source.hpp). The CLI runs one; a test may make one in-process.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "orch/gateway/fleet_config.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/gateway/gateway_state.hpp"
#include "orch/gateway/host_source.hpp"
#include "orch/serve/route_table.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::gateway {

class gateway_server {
 public:
  // Reads the fleet secret (when the config names one), opens the state file (config.state_file:
  // the queue and history of the gateway that ran before on it) and makes the parts; nothing
  // listens yet. Errors: invalid_config (the secret unreadable or empty), state_unusable.
  static result<std::unique_ptr<gateway_server>> prepare(fleet_config config,
                                                         serve::http_limits limits = {});
  ~gateway_server();  // stop()
  gateway_server(const gateway_server&) = delete;
  gateway_server& operator=(const gateway_server&) = delete;

  // Makes the file store's directories, starts the io thread, listens on the config's address
  // and port, and starts the host source (the [[host]] list, or the Ray driver). Once only. The
  // bound port. Errors: invalid_config (a directory cannot be made), listen_failed,
  // driver_failed.
  result<std::uint16_t> start();
  // The source stops, the listener and its connections close, the hosts' streams close, the
  // io thread ends. Idempotent; not on the io thread.
  void stop();

  const fleet_config& config() const noexcept { return config_; }

 private:
  gateway_server(fleet_config config, serve::http_limits limits, std::optional<std::string> secret,
                 std::unique_ptr<gateway_state> state, stored_state stored);

  fleet_config config_;
  serve::http_limits limits_;
  std::optional<std::string> secret_;
  std::unique_ptr<gateway_state> state_;  // handed to api_ at start()
  stored_state stored_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  serve::route_table routes_;
  std::unique_ptr<serve::http_server> http_;
  std::unique_ptr<gateway_api> api_;
  std::unique_ptr<host_source> source_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace orch::gateway
