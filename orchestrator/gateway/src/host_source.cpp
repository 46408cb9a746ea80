#include "orch/gateway/host_source.hpp"

#include <boost/asio/post.hpp>

namespace orch::gateway {

void static_host_source::start(boost::asio::io_context& io, event_handler on_event) {
  boost::asio::post(io, [hosts = hosts_, on_event = std::move(on_event)] {
    for (std::size_t i = 0; i < hosts.size(); ++i)
      on_event({host_event::kind::up, "host-" + std::to_string(i), hosts[i].host, hosts[i].port, {}});
  });
}

}  // namespace orch::gateway
