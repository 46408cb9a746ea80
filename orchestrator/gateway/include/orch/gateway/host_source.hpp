// host_source: where the gateway's hosts come from (docs/fleet.md, "The gateway"). Each source
// delivers host_up (a host's name and where its HTTP listens) and host_down (with why) on the
// gateway's io thread. Whether a host that is up answers is the gateway's own check
// (gateway_api.hpp): a host that stops answering is down until it answers again, whichever
// source named it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "orch/gateway/fleet_config.hpp"

namespace orch::gateway {

struct host_event {
  enum class kind { up, down };
  kind what = kind::up;
  std::string host;  // its name in the fleet ("host-0")
  std::string address;
  std::uint16_t port = 0;
  std::string reason;  // host_down: why
};

class host_source {
 public:
  using event_handler = std::function<void(const host_event&)>;
  virtual ~host_source() = default;
  // Starts delivering events to `on_event`, on `io`'s thread.
  virtual void start(boost::asio::io_context& io, event_handler on_event) = 0;
  // Stops delivering; idempotent. Not on the io thread.
  virtual void stop() = 0;
};

// The [[host]] list: hosts already running at fixed addresses, named host-0, host-1, ... in the
// order written, each up from the start.
class static_host_source final : public host_source {
 public:
  explicit static_host_source(std::vector<static_host> hosts) : hosts_(std::move(hosts)) {}
  void start(boost::asio::io_context& io, event_handler on_event) override;
  void stop() override {}

 private:
  std::vector<static_host> hosts_;
};

}  // namespace orch::gateway
