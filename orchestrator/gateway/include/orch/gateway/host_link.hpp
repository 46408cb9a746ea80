// host_link: how the gateway talks to one `comfy-orch serve` host (docs/fleet.md, "The gateway"):
// an HTTP request at a time, and the host's WebSocket event stream. Boost.Beast over TCP, all of
// it asynchronous on the gateway's io_context, so that the io thread, which schedules, never
// waits on a host. Every request and the WebSocket's handshake carry the fleet secret as
// "Authorization: Bearer <secret>" when the fleet has one (serve --fleet-secret-file). Each
// request has a deadline (connect, write and read together); the event stream has none, since a
// host may say nothing for as long as a node runs, and ends when the host closes it or dies.
// The stream asks the host for ComfyUI's previews with metadata (its feature_flags), whose
// frames name their prompt.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "orch/support/result.hpp"

namespace orch::gateway {

// The largest answer read from a host unless a request asks for less: a /history entry of large
// `ui` outputs, or an /object_info of many packs, stays far below it.
inline constexpr std::size_t max_host_answer_bytes = std::size_t{64} << 20;

struct host_answer {
  unsigned status = 0;
  std::string body;
  std::string content_type;  // its Content-Type, as sent (untrusted): empty when none
};

class host_link {
 public:
  // `address` and `port`: where the host's HTTP listens. `secret`: the fleet's, or nullopt.
  host_link(boost::asio::io_context& io, std::string address, std::uint16_t port,
            std::optional<std::string> secret);
  ~host_link();  // close_events()
  host_link(const host_link&) = delete;
  host_link& operator=(const host_link&) = delete;

  using answer_handler = std::function<void(result<host_answer>)>;
  // One request (`method` GET or POST, `target` its path and query, a `body` of `content_type`
  // for a POST); `done` runs on the io thread with the answer, whatever its status, or
  // host_not_listening (its connection was refused: the request never left) or
  // host_unreachable (it may have reached the host). From any thread. `done` may run after this
  // link is gone: it must not reach the link through a raw pointer. An answer whose body passes
  // `max_bytes` is host_unreachable ("body limit exceeded").
  void request(std::string method, std::string target, std::string body, answer_handler done,
               std::chrono::milliseconds deadline = std::chrono::seconds(10),
               std::size_t max_bytes = max_host_answer_bytes,
               std::string content_type = "application/json");

  // GET `target` with the answer's body written to `fd` (the caller's open file, which must stay
  // open until `done` runs) as it arrives, a piece at a time: a file of any size within
  // `max_bytes` takes no more memory than a piece. The host must send a piece within
  // `idle_deadline` of the last. `done` runs on the io thread: the status and the bytes written
  // (for a status other than 200, its body's first KiB is in `refusal` and nothing is written),
  // or host_unreachable, or answer_too_large when the body passes `max_bytes`. As request().
  struct download_answer {
    unsigned status = 0;
    std::uint64_t bytes = 0;
    std::string refusal;
  };
  using download_handler = std::function<void(result<download_answer>)>;
  void download(std::string target, int fd, std::uint64_t max_bytes, download_handler done,
                std::chrono::milliseconds idle_deadline = std::chrono::seconds(30));

  // Opens /ws?clientId=`client_id` on the io thread: `on_open` once the handshake is done, each
  // message to `on_message` (`binary`: a binary frame, a preview or a progress text), then
  // `on_closed` once (with why) when the stream ends for any reason but close_events(). A link
  // holds one stream at a time; opening another closes the first (silently).
  void open_events(std::string client_id, std::function<void()> on_open,
                   std::function<void(std::string, bool binary)> on_message,
                   std::function<void(std::string)> on_closed);
  // Closes the stream, without calling its on_closed. On the io thread.
  void close_events();

  const std::string& address() const noexcept { return address_; }
  std::uint16_t port() const noexcept { return port_; }

  struct stream_state;  // one event stream (host_link.cpp)

 private:
  // Where the host listens; nullopt when its address is no IP address.
  std::optional<boost::asio::ip::tcp::endpoint> endpoint() const;

  boost::asio::io_context& io_;
  std::string address_;
  std::uint16_t port_;
  std::optional<std::string> secret_;
  std::shared_ptr<stream_state> stream_;
};

// A request to `address`:`port` made and waited for on the calling thread, which must not be
// the io thread of `link`'s io_context (it runs there): for answers a waiting thread proxies.
result<host_answer> request_and_wait(host_link& link, std::string method, std::string target,
                                     std::string body = {});

}  // namespace orch::gateway
