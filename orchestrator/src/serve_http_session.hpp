// serve_http_session: one HTTP connection of `comfy-orch serve` (docs/serve.md), on the io
// thread: its requests read with their limits, the cross-origin check and the body budget,
// answered at once or on the API thread, and an upgrade handed to a WebSocket session
// (serve_ws_session.hpp). The server (serve_http.cpp) accepts connections and makes room.
#pragma once

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "orch/support/untrusted_text.hpp"
#include "serve_http_state.hpp"
#include "serve_origin.hpp"
#include "serve_ws_session.hpp"

namespace orch::orchestrator {

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
  http_session(tcp::socket socket, std::shared_ptr<state> st, bool refuse)
      : stream_(std::move(socket)), st_(std::move(st)), refuse_(refuse) {}
  ~http_session() {
    release_body();
    if (!upgraded_) --st_->connections;
  }

  // Since when it has been waiting for a request it has not finished sending (or, kept alive,
  // for its next one); empty while it is answered. What make_room() judges by.
  std::optional<std::chrono::steady_clock::time_point> waiting_since() const {
    return waiting_since_;
  }

  void start(std::chrono::milliseconds timeout) {
    release_body();  // the last request's body is answered and gone
    if (!waiting_since_) waiting_since_ = std::chrono::steady_clock::now();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(st_->limits.max_header));
    // No cap while the header is read: Beast compares a Content-Length with body_limit only as
    // the header ends, before the route (and so the cap) is known; on_header compares it. (Not
    // boost::none: Boost 1.74's parser reads an unset limit as one every length exceeds.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              self->on_header(ec);
                            });
  }

  void close() {
    waiting_since_.reset();  // gone: make_room() must not count it again
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

 private:
  // What a lingering close reads and drops at most after a refusal (for header_timeout at most).
  static constexpr std::size_t linger_bytes = std::size_t{256} << 20;

  void on_header(beast::error_code ec) {
    if (ec == http::error::header_limit)
      return refuse(431, "the request header is too large");
    if (ec) return close();  // timeout, reset, end of stream, garbage: nothing to answer
    if (refuse_) return refuse(503, "too many connections");
    const auto& req = parser_->get();
    view_ = http_request{};
    view_.method = std::string(req.method_string());
    split_target(std::string(req.target()), view_);
    // Before anything runs, WebSocket upgrades included (docs/security.md).
    const std::string host(req[http::field::host]);
    const std::string origin(req[http::field::origin]);
    if (!st_->limits.cors_origin && cross_origin_refused(host, origin)) {
      spdlog::warn("serve: request with non matching host and origin {} != {}, returning 403",
                   printable(host), printable(origin));
      return refuse(403, "cross-origin request refused: its Origin is not this server "
                         "(comfy-orch serve --enable-cors-header allows it)");
    }
    limit_ = st_->limits.body_limit_for ? st_->limits.body_limit_for(view_.method, view_.path)
                                        : st_->limits.max_body;
    const auto length = parser_->content_length();
    if (length && *length > limit_) return refuse(413, too_large());
    // Bodies are held in memory until complete: all of them together have a budget, so that
    // many large uploads stalled near their end cannot take the machine's memory (S13). A
    // chunked body counts at its cap.
    const std::size_t body = length ? static_cast<std::size_t>(*length)
                             : parser_->chunked() ? limit_  // its size is known only at its end
                                                  : 0;
    if (!reserve_body(body))
      return refuse(503, "too many request bytes are being received at once; retry shortly");
    parser_->body_limit(limit_);  // a chunked body's cap, counted chunk by chunk
    // Beast reads what fits in the buffer's free capacity (up to 64 KiB): after a header, that
    // is a few hundred bytes, and a 60 MiB upload would take 100000 reads.
    if (!parser_->is_done()) buffer_.reserve(std::size_t{64} << 10);
    if (!parser_->is_done() && beast::iequals(req[http::field::expect], "100-continue")) {
      // curl asks before it sends a body past 1 MiB, and waits a second for the answer.
      auto go_on = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                       req.version());
      stream_.expires_after(st_->limits.header_timeout);
      http::async_write(stream_, *go_on,
                        [self = shared_from_this(), go_on](beast::error_code e, std::size_t) {
                          if (e) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  // The body, a piece at a time: a body may take long (a large upload on a slow link), but a
  // body that stalls for header_timeout is cut off.
  void read_body() {
    if (parser_->is_done()) return on_message();
    stream_.expires_after(st_->limits.header_timeout);
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (ec == http::error::body_limit)
                              return self->refuse(413, self->too_large());
                            if (ec) return self->close();
                            self->read_body();
                          });
  }

  bool reserve_body(std::size_t bytes) {
    std::size_t now = st_->body_bytes.load();
    do {
      if (now + bytes > st_->limits.max_bodies_in_flight) return false;
    } while (!st_->body_bytes.compare_exchange_weak(now, now + bytes));
    reserved_ = bytes;
    return true;
  }
  void release_body() {
    st_->body_bytes -= reserved_;
    reserved_ = 0;
  }

  std::string too_large() const {
    return "the request body is larger than " + std::to_string(limit_) + " bytes";
  }

  void on_message() {
    waiting_since_.reset();  // its request is in: it is being answered
    auto req = parser_->release();
    if (websocket::is_upgrade(req)) return upgrade(std::move(req));
    if (req.method() == http::verb::options)  // a preflight: answered, as ComfyUI does
      return write({200, "text/plain", "", {}, nullptr}, req.version(), req.keep_alive(), false);
    http_request view = std::move(view_);
    view.body = std::move(req.body());
    view.content_type = std::string(req[http::field::content_type]);
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    if (st_->at_once && view.body.size() <= http_server::max_body_at_once) {
      if (auto now = answer(view, st_->at_once))
        return write(std::move(*now), version, keep_alive, false);
    }
    stream_.expires_never();  // the handler may wait for a worker
    boost::asio::post(st_->api, [self = shared_from_this(), view = std::move(view), version,
                                 keep_alive]() mutable {
      http_reply reply = *answer(view, [&](const http_request& r) {
        return std::optional<http_reply>(self->st_->on_request(r));
      });
      view = http_request{};  // an upload's body is not kept while the answer is written
      boost::asio::post(self->st_->io, [self, reply = std::move(reply), version,
                                        keep_alive]() mutable {
        self->write(std::move(reply), version, keep_alive, false);
      });
    });
  }

  void upgrade(http::request<http::string_body> req) {
    if (view_.path != "/ws") return refuse(404, "no websocket at " + view_.path);
    // Clients still in their handshake count too, or many upgrades at once would all pass.
    if (st_->ws_count + st_->ws_pending >= st_->limits.max_ws_clients)
      return refuse(503, "too many websocket clients");
    ++st_->ws_pending;
    std::string sid = view_.query.count("clientId") ? view_.query["clientId"] : std::string();
    if (sid.empty() || sid.size() > 128) sid = new_sid();
    upgraded_ = true;  // the connection is counted on by the websocket session now
    auto ws = std::make_shared<ws_session>(std::move(stream_), st_, std::move(sid));
    ws->start(std::move(req));
  }

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
  void write(http_reply reply, unsigned version, bool keep_alive, bool linger) {
    keep_alive = keep_alive && !linger && !st_->stopping;
    if (reply.file && reply.file->valid()) {
      auto out = std::make_shared<outgoing<http::file_body>>(
          http::response<http::file_body>(static_cast<http::status>(reply.status), version));
      beast::file file;
      file.native_handle(reply.file->release());
      beast::error_code ec;
      out->res.body().reset(std::move(file), ec);
      if (!ec) {
        set_fields(out->res, reply, keep_alive);
        out->res.prepare_payload();
        return send(std::move(out), linger);
      }
      reply = {500, "application/json", error_body("cannot read the file: " + ec.message()), {},
               nullptr};
    }
    auto out = std::make_shared<outgoing<http::string_body>>(
        http::response<http::string_body>(static_cast<http::status>(reply.status), version));
    set_fields(out->res, reply, keep_alive);
    out->res.body() = std::move(reply.body);
    out->res.prepare_payload();
    send(std::move(out), linger);
  }

  template <class Body>
  struct outgoing {
    explicit outgoing(http::response<Body> r) : res(std::move(r)) {}
    http::response<Body> res;
    std::optional<http::response_serializer<Body>> serializer;
  };

  // The answer, a piece at a time: a large file to a slow client may take long, but one that
  // stops reading for idle_timeout is cut off.
  template <class Body>
  void send(std::shared_ptr<outgoing<Body>> out, bool linger) {
    if (!out->serializer) out->serializer.emplace(out->res);
    stream_.expires_after(st_->limits.idle_timeout);
    http::async_write_some(
        stream_, *out->serializer,
        [self = shared_from_this(), out, linger](beast::error_code ec, std::size_t) mutable {
          if (ec) return self->close();
          if (!out->serializer->is_done()) return self->send(std::move(out), linger);
          if (linger) return self->linger();
          if (!out->res.keep_alive()) return self->close();
          self->await_next_request();
        });
  }

  // A kept-alive connection may stay quiet for idle_timeout; once its next request begins, its
  // header has header_timeout, as the first one had: a client that dribbles a header in is cut
  // off as soon as on a new connection.
  void await_next_request() {
    waiting_since_ = std::chrono::steady_clock::now();
    if (buffer_.size() > 0) return start(st_->limits.header_timeout);  // already begun
    stream_.expires_after(st_->limits.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->start(self->st_->limits.header_timeout);
                            });
  }

  // Answered before the client finished sending: closing now, with its bytes unread, would
  // reset the connection, and the client could lose the answer with it. So stop sending, read
  // and drop what comes for a while (as web servers' lingering close does), then close.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    stream_.expires_after(st_->limits.header_timeout);
    drain_.resize(std::size_t{1} << 20);
    drain();
  }

  void drain() {
    stream_.async_read_some(boost::asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > linger_bytes) return self->close();
                              self->drain();
                            });
  }

  // An error answer, and the connection's end; lingering if the request was not read whole.
  void refuse(unsigned status, const std::string& message) {
    const bool unread = !parser_->is_done();
    write({status, "application/json", error_body(message), {}, nullptr}, 11, false, unread);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<state> st_;
  http_request view_;  // the request being read: its method, path and query from its header
  std::size_t limit_ = 0;
  std::vector<char> drain_;
  std::size_t drained_ = 0;
  bool refuse_ = false;
  bool upgraded_ = false;
  std::optional<std::chrono::steady_clock::time_point> waiting_since_;
  std::size_t reserved_ = 0;  // of state::body_bytes, for the request being read or answered
};

}  // namespace orch::orchestrator
