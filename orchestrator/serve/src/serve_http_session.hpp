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
#include "orch/serve/serve_origin.hpp"
#include "orch/support/untrusted_text.hpp"
#include "serve_http_state.hpp"
#include "serve_upstream.hpp"
#include "serve_ws_session.hpp"
#include "spooled_body.hpp"

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

  void on_header(beast::error_code ec) {
    if (ec == http::error::header_limit)
      return refuse(431, "the request header is too large");
    if (ec) return close();  // timeout, reset, end of stream, garbage: nothing to answer
    if (refuse_) return refuse(503, "too many connections");
    const auto& req = header_->get();
    view_ = http_request{};
    view_.method = std::string(req.method_string());
    view_.target = std::string(req.target());
    split_target(view_.target, view_);
    for (const auto& field : req)
      view_.fields.emplace_back(std::string(field.name_string()), std::string(field.value()));
    // Before anything runs, WebSocket upgrades included (docs/security.md).
    const std::string host(req[http::field::host]);
    const std::string origin(req[http::field::origin]);
    if (!st_->limits.cors_origin && cross_origin_refused(host, origin)) {
      spdlog::warn("serve: request with non matching host and origin {} != {}, returning 403",
                   printable(host), printable(origin));
      return refuse(403, "cross-origin request refused: its Origin is not this server "
                         "(comfy-orch serve --enable-cors-header allows it)");
    }
    const body_rule rule = st_->limits.body_rule_for
                               ? st_->limits.body_rule_for(view_.method, view_.path)
                               : body_rule{st_->limits.max_body};
    limit_ = rule.limit;
    const auto length = header_->content_length();
    if (length && *length > limit_) return refuse(413, too_large());
    // The bodies being received have a budget, those held in memory and those spooled to disk
    // each their own, so that many large uploads stalled near their end can take neither the
    // machine's memory nor its disk (S13); charged as their bytes arrive (read_body).
    const bool has_body = !header_->is_done();
    const bool spool = rule.spooled && has_body;
    hold(body_, spool ? &st_->spooled : &st_->bodies);
    const bool go_on_asked = has_body && beast::iequals(req[http::field::expect], "100-continue");
    const unsigned version = req.version();
    if (spool) {
      if (auto s = spool_body(); !s) {
        spdlog::error("serve: {}", s.err().message);
        return refuse(500, "the server cannot keep the request body: " + s.err().message);
      }
    } else {
      in_memory_.emplace(std::move(*header_));
      in_memory_->body_limit(limit_);  // a chunked body's cap, counted chunk by chunk
    }
    header_.reset();
    // Beast reads what fits in the buffer's free capacity (up to 64 KiB): after a header, that
    // is a few hundred bytes, and a 60 MiB upload would take 100000 reads.
    if (has_body) buffer_.reserve(std::size_t{64} << 10);
    if (go_on_asked) {
      // curl asks before it sends a body past 1 MiB, and waits a second for the answer.
      auto go_on =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, version);
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

  // The body goes to a new unlinked file of the spool directory as it comes.
  status spool_body() {
    auto fd = open_spool_file(st_->limits.spool_directory);
    if (!fd) return fd.err();
    spooled_.emplace(std::move(*header_));
    spooled_->body_limit(limit_);
    beast::file file;
    file.native_handle(fd->release());
    beast::error_code ec;
    spooled_->get().body().reset(std::move(file), ec);
    if (ec) return error{serve_errc::file_io_failed, "a spooled request body: " + ec.message()};
    return ok_status();
  }

  void read_body() {
    if (spooled_) return read_body(*spooled_);
    read_body(*in_memory_);
  }

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

  void on_message() {
    waiting_since_.reset();  // its request is in: it is being answered
    body_.moving = false;
    if (spooled_) {
      auto req = spooled_->release();
      http_request view = std::move(view_);
      view.content_type = std::string(req[http::field::content_type]);
      view.usage_source = std::string(req["Comfy-Usage-Source"]);
      // The message's file closes its own descriptor; the handler gets one of its own.
      view.body_file = std::make_shared<ipc::unique_fd>(
          ::fcntl(req.body().file().native_handle(), F_DUPFD_CLOEXEC, 0));
      return dispatch(std::move(view), req.version(), req.keep_alive());
    }
    auto req = in_memory_->release();
    if (websocket::is_upgrade(req)) return upgrade(std::move(req));
    if (req.method() == http::verb::options)  // a preflight: answered, as ComfyUI does
      return write({200, "text/plain", "", {}, nullptr}, req.version(), req.keep_alive(), false);
    http_request view = std::move(view_);
    view.body = std::move(req.body());
    view.content_type = std::string(req[http::field::content_type]);
    view.usage_source = std::string(req["Comfy-Usage-Source"]);
    dispatch(std::move(view), req.version(), req.keep_alive());
  }

  // The request, answered on the io thread when the at-once handler can, else on the API thread;
  // a reply `later` is run on the waiting thread.
  void dispatch(http_request view, unsigned version, bool keep_alive) {
    if (st_->at_once && !view.body_file && view.body.size() <= http_server::max_body_at_once) {
      if (auto now = answer(view, st_->at_once))
        return reply(method_and_path(view), std::move(*now), version, keep_alive);
    }
    stream_.expires_never();  // the handler may take long (an upload stored)
    boost::asio::post(st_->api, [self = shared_from_this(), view = std::move(view), version,
                                 keep_alive]() mutable {
      http_reply r = *answer(view, [&](const http_request& q) {
        return std::optional<http_reply>(self->st_->on_request(q));
      });
      // An upload's body is not kept while the answer is written.
      boost::asio::post(self->st_->io, [self, about = method_and_path(view), r = std::move(r),
                                        version, keep_alive]() mutable {
        self->reply(std::move(about), std::move(r), version, keep_alive);
      });
    });
  }

  // What a request is logged under when its handler fails.
  static http_request method_and_path(const http_request& view) {
    http_request about;
    about.method = view.method;
    about.path = view.path;
    return about;
  }

  // On the io thread: writes `r`, or first runs its `later` on the waiting thread.
  void reply(http_request about, http_reply r, unsigned version, bool keep_alive) {
    if (!r.later) return write(std::move(r), version, keep_alive, false);
    stream_.expires_never();  // it waits for a worker
    boost::asio::post(st_->waiting, [self = shared_from_this(), about = std::move(about),
                                     later = std::move(r.later), version, keep_alive]() mutable {
      http_reply done = *answer(about, [&](const http_request&) {
        return std::optional<http_reply>(later());
      });
      done.later = nullptr;  // one wait at most
      boost::asio::post(self->st_->io, [self, done = std::move(done), version,
                                        keep_alive]() mutable {
        self->write(std::move(done), version, keep_alive, false);
      });
    });
  }

  void upgrade(http::request<http::string_body> req) {
    // ComfyUI serves every route under /api too, the WebSocket included.
    if (view_.path != "/ws" && view_.path != "/api/ws") return refuse(404, "no websocket here");
    if (!make_ws_room(*st_, peer_)) return refuse(503, "too many websocket clients");
    ++st_->ws_pending;
    std::string sid = view_.query.count("clientId") ? view_.query["clientId"] : std::string();
    if (sid.empty() || sid.size() > 128) sid = new_sid();
    upgraded_ = true;  // the connection is counted on by the websocket session now
    auto ws = std::make_shared<ws_session>(std::move(stream_), st_, std::move(sid), peer_);
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
    hold(answer_, nullptr);  // a file or a stream holds no memory while it waits: not charged
    if (reply.pieces) return stream(std::move(reply), version, keep_alive, linger);
    if (reply.forward) return relay(std::move(reply.forward), version, keep_alive);
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
    hold(answer_, &st_->answers);
    if (!grow(answer_, reply.body.size()))
      reply = {503, "application/json",
               error_body("too many answer bytes are being written at once; retry shortly"), {},
               nullptr};
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

  void stream(http_reply reply, unsigned version, bool keep_alive, bool linger) {
    auto out = std::make_shared<streamed>();
    out->res = http::response<http::empty_body>(static_cast<http::status>(reply.status), version);
    set_fields(out->res, reply, keep_alive);
    out->res.chunked(true);
    out->pieces = std::move(reply.pieces);
    out->header.emplace(out->res);
    hold(answer_, &st_->answers);
    waiting_since_ = std::chrono::steady_clock::now();
    stream_.expires_at(answer_deadline());
    http::async_write_header(stream_, *out->header,
                             [self = shared_from_this(), out, linger](beast::error_code ec,
                                                                      std::size_t n) {
                               if (ec) return self->close();
                               self->answer_.moved += n;
                               self->next_piece(out, linger);
                             });
  }

  void next_piece(const std::shared_ptr<streamed>& out, bool linger) {
    if (!answer_.budget) return;  // closed (to make room) while its last piece was written
    std::optional<std::string> piece;
    try {
      do piece = out->pieces();
      while (piece && piece->empty());  // an empty chunk would end the body
    } catch (const std::exception& e) {
      spdlog::error("serve: an answer could not be written whole: {}", e.what());
      return close();  // its client sees the body cut short, not a complete wrong one
    }
    const bool last = !piece;
    out->piece = last ? std::string() : std::move(*piece);
    // The last piece's charge goes back before this one's is taken.
    answer_.budget->release(peer_, answer_.charged);
    answer_.charged = 0;
    if (!grow(answer_, out->piece.size())) return close();
    waiting_since_ = std::chrono::steady_clock::now();
    stream_.expires_at(answer_deadline());
    const auto done = [self = shared_from_this(), out, linger, last](beast::error_code ec,
                                                                    std::size_t n) {
      if (ec) return self->close();
      self->answer_.moved += n;
      if (last) return self->answered(out->res.keep_alive(), linger);
      self->next_piece(out, linger);
    };
    if (last) return boost::asio::async_write(stream_, http::make_chunk_last(), done);
    boost::asio::async_write(stream_, http::make_chunk(boost::asio::buffer(out->piece)), done);
  }

  // A pack's aiohttp route: the request goes to its worker (serve_upstream.hpp), and the
  // worker's answer comes back as it arrives, a piece in memory at a time, charged as stream()'s
  // pieces are. A worker that does not answer (gone, restarting) is a 502 naming its env; one
  // that fails once its answer began cuts the connection, its body short.
  void relay(std::shared_ptr<forwarded_request> f, unsigned version, bool keep_alive) {
    http::request<http::empty_body> head(http::string_to_verb(f->request.method),
                                         f->request.target, 11);
    if (head.method() == http::verb::unknown) head.method_string(f->request.method);
    for (const auto& [name, value] : f->request.fields)
      if (!hop_by_hop(name) && !beast::iequals(name, "content-length")) head.set(name, value);
    auto upstream = std::make_shared<upstream_exchange>(st_->io, f->socket);
    stream_.expires_never();  // the pack's handler may take long
    waiting_since_.reset();
    hold(answer_, &st_->answers);
    if (!grow(answer_, upstream_exchange::piece_size))
      return write({503, "application/json",
                    error_body("too many answer bytes are being written at once; retry shortly"),
                    {}, nullptr},
                   version, false, false);
    upstream->start(std::move(head), std::move(f->request.body), f->request.body_file,
                    [self = shared_from_this(), upstream, f, version,
                     keep_alive](beast::error_code ec) {
                      if (ec) {
                        spdlog::warn("serve: {} {}: the worker of env {} did not answer: {}",
                                     f->request.method, printable(f->request.path), f->env,
                                     ec.message());
                        return self->write({502, "application/json",
                                            error_body("the worker of env " + f->env +
                                                       ", which serves this route, did not "
                                                       "answer (" + ec.message() +
                                                       "); it restarts after a loss: try again "
                                                       "shortly"),
                                            {}, nullptr},
                                           version, keep_alive, false);
                      }
                      self->relay_head(upstream, version, keep_alive);
                    });
  }

  static bool hop_by_hop(beast::string_view name) {
    for (const char* hop : {"connection", "keep-alive", "proxy-authenticate",
                            "proxy-authorization", "te", "trailer", "transfer-encoding",
                            "upgrade", "proxy-connection"})
      if (beast::iequals(name, hop)) return true;
    return false;
  }

  void relay_head(const std::shared_ptr<upstream_exchange>& upstream, unsigned version,
                  bool keep_alive) {
    const auto& answer = upstream->answer();
    auto out = std::make_shared<streamed>();
    out->res = http::response<http::empty_body>(answer.result(), version);
    out->res.reason(answer.reason());
    for (const auto& field : answer)
      if (!hop_by_hop(field.name_string()) && field.name() != http::field::content_length)
        out->res.insert(field.name_string(), field.value());
    const auto length = upstream->content_length();
    if (length) out->res.content_length(*length);
    else out->res.chunked(!upstream->finished());
    out->res.keep_alive(keep_alive && !st_->stopping);
    out->header.emplace(out->res);
    waiting_since_ = std::chrono::steady_clock::now();
    stream_.expires_at(answer_deadline());
    http::async_write_header(stream_, *out->header,
                             [self = shared_from_this(), out, upstream](beast::error_code ec,
                                                                        std::size_t n) {
                               if (ec) return self->close();
                               self->answer_.moved += n;
                               self->relay_piece(out, upstream);
                             });
  }

  void relay_piece(const std::shared_ptr<streamed>& out,
                   const std::shared_ptr<upstream_exchange>& upstream) {
    if (!answer_.budget) return;  // closed to make room
    stream_.expires_never();  // waiting on the worker, not on its client
    waiting_since_.reset();
    upstream->read_some([self = shared_from_this(), out, upstream](beast::error_code ec,
                                                                   std::string_view piece) {
      if (ec) return self->close();  // the worker failed mid-answer: its body cut short
      const bool chunked = out->res.chunked();
      const bool last = piece.empty() && upstream->finished();
      const auto done = [self, out, upstream, last](beast::error_code e, std::size_t n) {
        if (e) return self->close();
        self->answer_.moved += n;
        if (last) return self->answered(out->res.keep_alive(), false);
        self->relay_piece(out, upstream);
      };
      self->waiting_since_ = std::chrono::steady_clock::now();
      self->stream_.expires_at(self->answer_deadline());
      if (last && chunked) return boost::asio::async_write(self->stream_, http::make_chunk_last(), done);
      if (last) return done({}, 0);
      if (piece.empty()) return self->relay_piece(out, upstream);
      if (chunked)
        return boost::asio::async_write(
            self->stream_, http::make_chunk(boost::asio::buffer(piece.data(), piece.size())),
            done);
      boost::asio::async_write(self->stream_, boost::asio::buffer(piece.data(), piece.size()),
                               done);
    });
  }

  // Its answer is written: what it held goes back, and the connection waits for its next
  // request, lingers, or closes.
  void answered(bool keep_alive, bool linger) {
    release(answer_);
    if (linger) return this->linger();
    if (!keep_alive) return close();
    await_next_request();
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
    const bool unread = spooled_     ? !spooled_->is_done()
                        : in_memory_ ? !in_memory_->is_done()
                                 : header_ && !header_->is_done();
    release(body_);  // what was read of it is not kept
    write({status, "application/json", error_body(message), {}, nullptr}, 11, false, unread);
  }

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

}  // namespace orch::orchestrator
