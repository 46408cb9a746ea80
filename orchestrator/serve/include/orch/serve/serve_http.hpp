// serve_http: the HTTP and WebSocket server of `comfy-orch serve` (docs/serve.md), Boost.Beast on
// the host's own io_context: every socket is read and written on the io thread, and requests are
// answered on one API thread, but for those the at-once handler answers on the io thread
// without a wait; what must wait for a worker's answer is answered on a waiting thread
// (http_reply::later), so that neither of the others waits on a busy worker. Untrusted
// clients meet limits at every step: the header size and the body size are capped (431 and 413 past
// them; the body's cap is chosen from the request's route once its header is read, so uploads can
// be larger than prompts, and spooled to disk), a request's header must arrive within
// `header_timeout`, its body must not stall for as long nor fall below `min_body_rate`, a
// connection that says nothing for `idle_timeout` is closed, and connections (in all and per
// peer address) and WebSocket clients are counted; when every slot is taken, the connection that
// has waited longest for its request makes room. A request refused before its
// body was read is answered, and the rest of what the client sends is read and dropped for a while
// before the connection closes, so that the client reads the answer instead of a connection reset.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

class fleet_secret;  // fleet_auth.hpp

struct http_request {
  std::string method;  // GET, POST, ...
  std::string path;    // percent-decoded, without the query
  // The path's segments, each percent-decoded on its own: a route's parameter may hold a '/'
  // sent as %2F (aiohttp's match_info), which `path` cannot tell from a separator.
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
  std::string body;
  // A spooled body (an upload's, spooled_body.hpp) is this file instead, and `body` is empty.
  std::shared_ptr<ipc::unique_fd> body_file = nullptr;
  std::string content_type;
  // The Comfy-Usage-Source header, which ComfyUI records in a prompt's extra_data.
  std::string usage_source;
  // The request line's target as sent, and the header's fields: what a request forwarded to a
  // worker's aiohttp route carries (forwarded_request).
  std::string target;
  std::vector<std::pair<std::string, std::string>> fields;
};

// A request of a pack's aiohttp route, forwarded to the worker that serves it on `socket`
// (serve_upstream.hpp), whose answer is streamed back as it comes.
struct forwarded_request {
  std::string socket;
  std::string env;  // its env and pack, named in the 502 when the worker does not answer
  http_request request;
};

struct http_reply {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};  // more (Content-Disposition)
  // When set, the body is this open file's content instead, streamed from the descriptor
  // (GET /view): what the handler checked is what is sent, and never held whole in memory.
  std::shared_ptr<ipc::unique_fd> file = nullptr;
  // When set, the answer is what this returns, run on the server's waiting thread: for a
  // request that must wait for a worker (a VALIDATE_INPUTS in a busy one), so that no other
  // request waits behind it on the io or the API thread.
  std::function<http_reply()> later = nullptr;
  // When set, the body is what this returns, a piece at a time until it returns nullopt, sent
  // chunked as the client reads: a large answer (/history) is neither built whole nor held. Run
  // on the io thread, so each piece must be quick to make.
  std::function<std::optional<std::string>()> pieces = nullptr;
  // When set, the answer is the worker's, to this request (serve_upstream.hpp).
  std::shared_ptr<forwarded_request> forward = nullptr;
};

// `target` (a request line's path and query) as its percent-decoded path and query fields.
void split_target(std::string_view target, http_request& r);
// `text` with each %XX decoded as in a path ('+' stays '+'); a malformed escape is kept as it is
// (urllib.parse.unquote's rule).
std::string percent_decoded(std::string_view text);

// How one route takes its request's body.
struct body_rule {
  std::size_t limit;     // its cap (413 past it)
  bool spooled = false;  // written to a file of spool_directory as it comes, not held in memory
};

struct http_limits {
  std::size_t max_body = std::size_t{8} << 20;  // every body's cap, unless body_rule_for is set
  // The rule for one request's body, from its method and decoded path (the route that will
  // answer it); unset, max_body for all, held in memory.
  std::function<body_rule(const std::string& method, const std::string& path)> body_rule_for;
  std::filesystem::path spool_directory;  // where spooled bodies are written (unlinked at once)
  std::size_t max_header = std::size_t{64} << 10;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  unsigned max_connections = 256;
  // The connections one peer address may hold at once: one peer cannot take every slot.
  unsigned max_connections_per_peer = 64;
  // Bytes a second a request body must average after its first header_timeout (0: no floor).
  std::size_t min_body_rate = 1024;
  unsigned max_ws_clients = 64;
  // The WebSocket clients one peer address may hold: one address had taken all 64, and the
  // user's tab got 503. Past it that address's oldest client is cut.
  unsigned max_ws_clients_per_peer = 16;
  // Messages and bytes waiting for a WebSocket client that does not read; past either, it is
  // disconnected (its queue had held 1.45 GB).
  std::size_t max_ws_queue = 4096;
  std::size_t max_ws_queue_bytes = std::size_t{8} << 20;
  // The request bodies held in memory at once, counted as their bytes arrive (20 uploads of
  // 60 MiB stalled near their end had held 1.2 GB; counted as announced, 24 bodies trickling in
  // had held the whole budget for hours). A peer holds half at most; past it, the slowest holder,
  // if at most half as fast as the body that needs room, is closed, else that body gets 503. The first 64 KiB
  // of each body are not counted (byte_budget.hpp): small requests are never refused for it.
  std::size_t max_bodies_in_flight = std::size_t{192} << 20;
  // The same for spooled bodies, on disk: uploads being received cannot fill the disk.
  std::size_t max_spooled_in_flight = std::size_t{1} << 30;
  // The same for answers held in memory while they are written (8 clients that never read a
  // 125 MB /history had taken 1.1 GB). A streamed answer counts its piece in flight.
  std::size_t max_answers_in_flight = std::size_t{256} << 20;
  // Bytes a second an answer must average once it has had header_timeout (0: no floor): a
  // client that reads a large answer slowly enough had held it, and its slot, for hours.
  std::size_t min_answer_rate = 1024;
  // --enable-cors-header's origin: every answer allows it, and cross-origin requests are not
  // refused; unset, a loopback server refuses them (serve_origin.hpp).
  std::optional<std::string> cors_origin;
  // --fleet-secret-file's secret: every request and WebSocket upgrade must carry it
  // (`Authorization: Bearer <secret>`), else 401 before any route (fleet_auth.hpp); unset,
  // no request is asked for one.
  std::shared_ptr<const fleet_secret> fleet;
};

class http_server {
 public:
  using handler = std::function<http_reply(const http_request&)>;
  // Answers a request on the io thread itself, when that needs no wait (nullopt: the request
  // goes to the API thread as any other). Offered only requests whose body is at most
  // max_body_at_once, so the io thread never spends long on one.
  using at_once_handler = std::function<std::optional<http_reply>(const http_request&)>;
  static constexpr std::size_t max_body_at_once = std::size_t{64} << 10;
  // A WebSocket client connected with this sid (its clientId, or a new one): what to send it
  // first (ComfyUI's status message, and the running node to the client that queued it).
  using ws_greeting = std::function<std::vector<std::string>(const std::string& sid)>;

  http_server(boost::asio::io_context& io, http_limits limits, handler on_request,
              at_once_handler at_once, ws_greeting on_ws_connect);
  ~http_server();  // stop()
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds and starts accepting. `port` 0 picks a free one. Returns the bound port.
  // Errors: "listen_failed" (the address and the system's reason).
  result<std::uint16_t> listen(const std::string& address, std::uint16_t port);
  // Sends a text frame to the WebSocket client `sid`, or to every client when sid is empty
  // (ComfyUI's send_sync). From any thread.
  // `binary`: a binary frame (ComfyUI's previews, a pack's binary events), else text.
  void send(const std::string& sid, std::string text, bool binary = false);
  // A preview (binary): PREVIEW_IMAGE_WITH_METADATA to a client whose feature_flags ask for it,
  // PREVIEW_IMAGE to any other, as ComfyUI chooses.
  void send_preview(const std::string& sid, std::string legacy, std::string with_metadata);
  std::size_t ws_clients() const;
  // Stops accepting, closes every connection and waits for the API thread. Idempotent; not on
  // the io thread.
  void stop();

  struct state;  // shared with the sessions

 private:
  std::shared_ptr<state> state_;
  bool stopped_ = false;
};

}  // namespace orch::serve
