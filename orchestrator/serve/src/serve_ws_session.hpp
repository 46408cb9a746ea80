// serve_ws_session: one WebSocket client of `comfy-orch serve` (docs/serve.md): the handshake,
// its registration by sid (a reconnect replaces the old session, as ComfyUI's), the greeting,
// and a send queue bounded in messages and bytes (a client that does not read is disconnected,
// never the server's memory). The messages queued together leave in one write (corked_stream.hpp). Everything runs
// on the io thread.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/serve/corked_stream.hpp"
#include "orch/serve/frontend_routes.hpp"
#include "orch/support/untrusted_text.hpp"
#include "serve_http_state.hpp"

namespace orch::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using state = http_server::state;
using nlohmann::json;

class ws_session : public std::enable_shared_from_this<ws_session> {
 public:
  ws_session(beast::tcp_stream&& stream, std::shared_ptr<state> st, std::string sid,
             boost::asio::ip::address peer)
      : ws_(cork_limit, std::move(stream)),
        st_(std::move(st)),
        sid_(std::move(sid)),
        peer_(peer),
        opened_(std::chrono::steady_clock::now()) {}
  // The connection was counted when it was accepted; it ends with this session, whether the
  // handshake failed or the client left.
  ~ws_session() {
    --st_->connections;
  }

  void start(http::request<http::string_body> req) {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(64 << 10);  // clients send nothing ComfyUI reads; keep it small
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        --self->st_->ws_pending;  // the slot reserved at the upgrade goes back
        return;
      }
      self->open();
    });
  }

  void deliver(std::string text, bool binary = false) {
    if (closed_) return;
    if (queue_.size() >= st_->limits.max_ws_queue ||
        queued_bytes_ + text.size() > st_->limits.max_ws_queue_bytes) {
      // Cut off at once (a close frame would wait behind the writes it does not read).
      spdlog::warn("serve: websocket client {} is not reading ({} messages, {} bytes waiting): "
                   "disconnected",
                   printable(sid_), queue_.size(), queued_bytes_);
      closed_ = true;
      beast::error_code ec;
      beast::get_lowest_layer(ws_).socket().close(ec);
      return;
    }
    queued_bytes_ += text.size();
    if (binary) binary_.insert(sent_ + queue_.size());
    queue_.push_back(std::move(text));
    if (queue_.size() > 1) return;  // it goes out behind the write in progress
    ws_.next_layer().cork();  // until the queue is empty: what is queued meanwhile joins it
    write_next();
  }

  const boost::asio::ip::address& peer() const { return peer_; }
  // Its feature_flags asked for PREVIEW_IMAGE_WITH_METADATA (ComfyUI's choice per client).
  bool wants_preview_metadata() const { return preview_metadata_; }
  std::chrono::steady_clock::time_point opened() const { return opened_; }

  // Ends it at once, its slot free for another client (make_ws_room): no close frame, which a
  // client that does not read would hold back.
  void cut() {
    if (closed_) return;
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
    gone();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    ws_.async_close(websocket::close_code::going_away,
                    [self = shared_from_this()](beast::error_code) {});
  }

 private:
  void open() {
    --st_->ws_pending;
    if (st_->stopping) return close();  // the handshake finished after stop(): nobody greets
    if (auto it = st_->ws.find(sid_); it != st_->ws.end())
      if (auto old = it->second.lock()) old->close();  // a reconnect replaces it (ComfyUI)
    st_->ws[sid_] = weak_from_this();
    st_->ws_count = static_cast<unsigned>(st_->ws.size());
    registered_ = true;
    if (st_->greet)
      for (auto& message : st_->greet(sid_)) deliver(std::move(message));
    read_next();
  }

  void read_next() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->gone();
      self->answer_feature_flags();
      self->buffer_.consume(self->buffer_.size());
      self->read_next();
    });
  }

  // ComfyUI's one exchange on the socket: a client's first message, when it is
  // {"type": "feature_flags"}, is answered with the server's flags (frontend_routes.hpp).
  // Everything else a client sends is read and dropped unparsed, as ComfyUI drops it.
  void answer_feature_flags() {
    if (first_read_ || !ws_.got_text()) return;
    first_read_ = true;
    if (buffer_.size() > 4096) return;  // a client's flags are a few dozen bytes
    const auto body = executor::parse_bounded_json(beast::buffers_to_string(buffer_.data()));
    if (!body || !body->is_object() || body->value("type", json()) != "feature_flags") return;
    const json flags = body->value("data", json::object());
    preview_metadata_ = flags.is_object() && flags.value("supports_preview_metadata", false);
    const auto rule = st_->limits.body_rule_for
                          ? st_->limits.body_rule_for("POST", "/upload/image")
                          : body_rule{st_->limits.max_body};
    deliver(json{{"type", "feature_flags"}, {"data", server_feature_flags(rule.limit)}}.dump());
  }

  void write_next() {
    ws_.text(binary_.erase(sent_) == 0);
    ws_.async_write(boost::asio::buffer(queue_.front()),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) {
                      self->queued_bytes_ -= self->queue_.front().size();
                      self->queue_.pop_front();  // gone() keeps it until here: Beast reads it
                      ++self->sent_;
                      if (ec) return self->gone();
                      if (!self->queue_.empty() && !self->closed_) return self->write_next();
                      self->ws_.next_layer().uncork();
                    });
  }

  void gone() {
    closed_ = true;
    if (queue_.size() > 1) {  // the front is in flight
      for (auto it = queue_.begin() + 1; it != queue_.end(); ++it) queued_bytes_ -= it->size();
      queue_.erase(queue_.begin() + 1, queue_.end());
    }
    if (!registered_) return;
    registered_ = false;
    if (auto it = st_->ws.find(sid_); it != st_->ws.end() && it->second.lock().get() == this)
      st_->ws.erase(it);
    st_->ws_count = static_cast<unsigned>(st_->ws.size());
  }

  // Bytes gathered before a corked burst is sent anyway; a client that does not read holds back
  // the writes beyond it, and then the queue.
  static constexpr std::size_t cork_limit = 64 << 10;

  websocket::stream<corked_stream<beast::tcp_stream>> ws_;
  beast::flat_buffer buffer_;
  std::shared_ptr<state> st_;
  std::string sid_;
  boost::asio::ip::address peer_;
  std::chrono::steady_clock::time_point opened_;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  bool preview_metadata_ = false;
  std::uint64_t sent_ = 0;          // the frames written so far: the number of queue_'s front
  std::set<std::uint64_t> binary_;  // the numbers of the queued frames that are binary
  bool closed_ = false;
  bool registered_ = false;
  bool first_read_ = false;  // the client's first text message has been read
};

}  // namespace orch::serve
