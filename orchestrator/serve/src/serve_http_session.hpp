// serve_http_session: one HTTP connection of `comfy-orch serve` (docs/serve.md), on the io
// thread: its requests read with their limits, the cross-origin check and the body budgets (a
// body held in memory, or spooled to disk as uploads are: spooled_body.hpp), answered at once or
// on the API thread, and an upgrade handed to a WebSocket session (serve_ws_session.hpp). The
// server (serve_http.cpp) accepts connections and makes room.
#pragma once

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "orch/serve/errc.hpp"
#include "orch/serve/fleet_auth.hpp"
#include "orch/serve/serve_origin.hpp"
#include "orch/support/untrusted_text.hpp"
#include "serve_http_state.hpp"
#include "serve_upstream.hpp"
#include "serve_ws_session.hpp"
#include "spooled_body.hpp"

namespace orch::serve {

namespace serve_http_detail {

inline std::string new_sid() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s(32, '0');
  for (auto& c : s) c = hex[gen() & 15];
  return s;
}

// Messages quote the request (a path, a clientId): invalid UTF-8 in them becomes U+FFFD, never
// an exception on the io thread.
inline std::string error_body(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

// A handler's answer; a handler that throws is answered 500, with its message.
template <class Handler>
inline std::optional<http_reply> answer(const http_request& view, const Handler& handler) {
  try {
    return handler(view);
  } catch (const std::exception& e) {
    spdlog::error("serve: {} {} failed: {}", view.method, view.path, e.what());
    return http_reply{500, "application/json", error_body(e.what()), {}, nullptr};
  }
}

}  // namespace serve_http_detail

using serve_http_detail::answer;
using serve_http_detail::error_body;
using serve_http_detail::new_sid;

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  http_session(tcp::socket socket, boost::asio::ip::address peer, std::shared_ptr<state> st,
               bool refuse)
      : stream_(std::move(socket)), st_(std::move(st)), peer_(peer), refuse_(refuse) {}
  ~http_session() {
    release(body_);
    release(answer_);
    if (!upgraded_) --st_->connections;
  }

  // Since when it has been waiting for a request it has not finished sending (or, kept alive,
  // for its next one), or for its client to read the piece of its answer being written; empty
  // while its handler runs. What make_room() judges by.
  std::optional<std::chrono::steady_clock::time_point> waiting_since() const {
    return waiting_since_;
  }
  const boost::asio::ip::address& peer() const { return peer_; }

  // The bytes a second its body arrives or its answer leaves, when it holds bytes of `budget`
  // and is still receiving or sending them (not while its handler runs).
  std::optional<double> rate_holding(const byte_budget& budget) const {
    for (const holding* h : {&body_, &answer_})
      if (h->budget == &budget && h->charged > 0 && h->moving) return h->rate();
    return std::nullopt;
  }

  void start(std::chrono::milliseconds timeout) {
    release(body_);  // the last request's body is answered and gone
    if (!waiting_since_) waiting_since_ = std::chrono::steady_clock::now();
    in_memory_.reset();
    spooled_.reset();
    header_.emplace();
    header_->header_limit(static_cast<std::uint32_t>(st_->limits.max_header));
    // No cap while the header is read: Beast compares a Content-Length with body_limit only as
    // the header ends, before the route (and so the cap) is known; on_header compares it. (Not
    // boost::none: Boost 1.74's parser reads an unset limit as one every length exceeds.)
    header_->body_limit(std::numeric_limits<std::uint64_t>::max());
    // A deadline for the whole header, not for each read: a header sent a byte at a time ends
    // when the first byte's allowance does.
    stream_.expires_after(timeout);
    http::async_read_header(stream_, buffer_, *header_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              self->on_header(ec);
                            });
  }

  // Its bytes go back to their budgets at once: make_budget_room() closes it to use them.
  void close() {
    waiting_since_.reset();  // gone: make_room() must not count it again
    release(body_);
    release(answer_);
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

 private:
  // What a lingering close reads and drops at most after a refusal (for header_timeout at most).
  static constexpr std::size_t linger_bytes = std::size_t{256} << 20;

  // The bytes a request body or an answer holds of a budget, and how fast it moves.
  struct holding {
    byte_budget* budget = nullptr;
    std::size_t charged = 0;
    std::size_t moved = 0;  // received, or sent
    std::chrono::steady_clock::time_point since;
    bool moving = true;  // false once a body is received whole
    double rate() const {
      const auto held = std::chrono::steady_clock::now() - since;
      // From 10 ms: a holder a moment old is judged by what it moved, not by a zero time.
      return static_cast<double>(moved) /
             std::max(0.01, std::chrono::duration<double>(held).count());
    }
  };

  void hold(holding& h, byte_budget* budget) {
    release(h);
    h = {budget, 0, 0, std::chrono::steady_clock::now(), true};
  }

  // Charges `h`'s budget for what it holds now, `total` bytes: when it cannot, a slower holder
  // (of this peer's, when the peer holds its share) is closed to make room. False when none is.
  bool grow(holding& h, std::size_t total) {
    const std::size_t due = byte_budget::due(total);
    if (!h.budget || due <= h.charged) return true;
    const std::size_t more = due - h.charged;
    for (;;) {
      const auto verdict = h.budget->charge(peer_, more);
      if (verdict == byte_budget::verdict::charged) break;
      // An answer not yet begun has no rate: any reader slower than none may make room.
      const double rate = h.moved == 0 ? std::numeric_limits<double>::infinity() : h.rate();
      if (!make_budget_room(*st_, *h.budget, *this,
                            verdict == byte_budget::verdict::over_share, rate))
        return false;
    }
    h.charged += more;
    return true;
  }

  void release(holding& h) {
    if (h.budget) h.budget->release(peer_, h.charged);
    h = {};
  }

  void on_header(beast::error_code ec);

  // The body goes to a new unlinked file of the spool directory as it comes.
  status spool_body();

  void read_body();

  // The body, a piece at a time: a body may take long (a large upload on a slow link), but it
  // must keep coming (body_deadline).
  template <class Parser>
  void read_body(Parser& parser) {
    if (parser.is_done()) return on_message();
    stream_.expires_at(body_deadline());
    http::async_read_some(stream_, buffer_, parser,
                          [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                            if (ec == http::error::body_limit)
                              return self->refuse(413, self->too_large());
                            if (ec) return self->close();
                            self->body_.moved += n;
                            if (!self->grow(self->body_, self->body_.moved))
                              return self->refuse(503, "too many request bytes are being "
                                                       "received at once; retry shortly");
                            self->read_body();
                          });
  }

  // A body is cut off when it stalls for header_timeout, or when it falls behind min_body_rate
  // on average after a first header_timeout (mod_reqtimeout's rule): one that came a byte every
  // few seconds had held its connection for as long as its client liked (S6).
  std::chrono::steady_clock::time_point body_deadline() const {
    return deadline(body_, st_->limits.header_timeout, st_->limits.min_body_rate);
  }

  // The same for an answer: its client may stop reading for idle_timeout, and must read
  // min_answer_rate on average after a first header_timeout.
  std::chrono::steady_clock::time_point answer_deadline() const {
    return deadline(answer_, st_->limits.idle_timeout, st_->limits.min_answer_rate);
  }

  std::chrono::steady_clock::time_point deadline(const holding& h,
                                                 std::chrono::milliseconds stall,
                                                 std::size_t min_rate) const {
    const auto stalled = std::chrono::steady_clock::now() + stall;
    if (min_rate == 0) return stalled;
    const auto earned = std::chrono::milliseconds(h.moved * 1000 / min_rate);
    return std::min(stalled, h.since + st_->limits.header_timeout + earned);
  }

  std::string too_large() const {
    return "the request body is larger than " + std::to_string(limit_) + " bytes";
  }

  void on_message();

  // The request, answered on the io thread when the at-once handler can, else on the API thread;
  // a reply `later` is run on the waiting thread.
  void dispatch(http_request view, unsigned version, bool keep_alive);

  // What a request is logged under when its handler fails.
  static http_request method_and_path(const http_request& view) {
    http_request about;
    about.method = view.method;
    about.path = view.path;
    return about;
  }

  // On the io thread: writes `r`, or first runs its `later` on the waiting thread.
  void reply(http_request about, http_reply r, unsigned version, bool keep_alive);

  void upgrade(http::request<http::string_body> req);

  template <class Body>
  void set_fields(http::response<Body>& res, const http_reply& reply, bool keep_alive) {
    res.set(http::field::server, "comfy-orch");
    res.set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) res.set(name, value);
    if (const auto& origin = st_->limits.cors_origin) {  // --enable-cors-header, as ComfyUI's
      res.set(http::field::access_control_allow_origin, *origin);
      res.set(http::field::access_control_allow_methods, "POST, GET, DELETE, PUT, OPTIONS");
      res.set(http::field::access_control_allow_headers, "Content-Type, Authorization");
      res.set(http::field::access_control_allow_credentials, "true");
    }
    res.keep_alive(keep_alive);
  }

  // `linger`: the request's body was not read; read and drop it after the answer.
  void write(http_reply reply, unsigned version, bool keep_alive, bool linger);

  template <class Body>
  struct outgoing {
    explicit outgoing(http::response<Body> r) : res(std::move(r)) {}
    http::response<Body> res;
    std::optional<http::response_serializer<Body>> serializer;
  };

  // The answer, a piece at a time: a large file to a slow client may take long, but one that
  // stops reading, or reads too slowly, is cut off (answer_deadline); while it waits for its
  // client, make_room() may close it.
  template <class Body>
  void send(std::shared_ptr<outgoing<Body>> out, bool linger) {
    if (!out->serializer) out->serializer.emplace(out->res);
    waiting_since_ = std::chrono::steady_clock::now();
    stream_.expires_at(answer_deadline());
    http::async_write_some(
        stream_, *out->serializer,
        [self = shared_from_this(), out, linger](beast::error_code ec, std::size_t n) mutable {
          if (ec) return self->close();
          self->answer_.moved += n;
          if (!out->serializer->is_done()) return self->send(std::move(out), linger);
          self->answered(out->res.keep_alive(), linger);
        });
  }

  // An answer whose body comes from reply.pieces: its header, then each piece as a chunk as
  // soon as the last one is written, each charged to the answers' budget while it is written.
  struct streamed {
    http::response<http::empty_body> res;
    std::optional<http::response_serializer<http::empty_body>> header;
    std::function<std::optional<std::string>()> pieces;
    std::string piece;
  };

  void stream(http_reply reply, unsigned version, bool keep_alive, bool linger);

  void next_piece(const std::shared_ptr<streamed>& out, bool linger);

  // A pack's aiohttp route: the request goes to its worker (serve_upstream.hpp), and the
  // worker's answer comes back as it arrives, a piece in memory at a time, charged as stream()'s
  // pieces are. A worker that does not answer (gone, restarting) is a 502 naming its env; one
  // that fails once its answer began cuts the connection, its body short (serve_relay.cpp).
  void relay(std::shared_ptr<forwarded_request> f, unsigned version, bool keep_alive);
  void relay_head(const std::shared_ptr<upstream_exchange>& upstream, unsigned version,
                  bool keep_alive);
  void relay_piece(const std::shared_ptr<streamed>& out,
                   const std::shared_ptr<upstream_exchange>& upstream);

  // Its answer is written: what it held goes back, and the connection waits for its next
  // request, lingers, or closes.
  void answered(bool keep_alive, bool linger);

  // A kept-alive connection may stay quiet for idle_timeout; once its next request begins, its
  // header has header_timeout, as the first one had: a client that dribbles a header in is cut
  // off as soon as on a new connection.
  void await_next_request();

  // Answered before the client finished sending: closing now, with its bytes unread, would
  // reset the connection, and the client could lose the answer with it. So stop sending, read
  // and drop what comes for a while (as web servers' lingering close does), then close.
  void linger();

  void drain();

  // An error answer, and the connection's end; lingering if the request was not read whole.
  void refuse(unsigned status, const std::string& message);
  void refuse(http_reply reply);  // with its own body and headers (a fleet host's 401)

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  // A request's header is read first; then its body, held in memory or spooled to a file.
  std::optional<http::request_parser<http::empty_body>> header_;
  std::optional<http::request_parser<http::string_body>> in_memory_;
  std::optional<http::request_parser<http::file_body>> spooled_;
  std::shared_ptr<state> st_;
  boost::asio::ip::address peer_;
  http_request view_;  // the request being read: its method, path and query from its header
  std::size_t limit_ = 0;
  std::vector<char> drain_;
  std::size_t drained_ = 0;
  bool refuse_ = false;
  bool upgraded_ = false;
  std::optional<std::chrono::steady_clock::time_point> waiting_since_;
  holding body_;    // the request's, from its header to its answer
  holding answer_;  // the answer's, while it is written
};

}  // namespace orch::serve
