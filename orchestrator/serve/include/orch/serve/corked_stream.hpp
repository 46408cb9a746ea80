// corked_stream: a stream layer under Beast's websocket::stream that gathers what is written
// while it is corked and sends it in one write when it is uncorked, like TCP_CORK.
//
// Why: serve sends a WebSocket client three to five messages at a time (docs/serve.md), and each
// loopback `sendmsg` costs the sender the receiver's whole input path (docs/performance.md).
// Corking one client's burst sends it in one. The layer sits below Beast, so Beast's own frames
// (the handshake answer, pongs, the close handshake) go through the same byte queue in the order
// Beast wrote them: nothing can interleave with a batch.
//
// `uncork()` sends what is pending only after the handlers already queued on the executor have
// run, as an event loop sends at the end of its turn: serve posts each message to the session
// (one `post` per event), so a burst that arrives as several posts still leaves in one write,
// and a session corked again meanwhile holds it until its own queue is empty.
//
// Every write is copied into `pending` and completes at once (posted, never inline), so a
// corked burst runs through its handlers without touching the socket. One write to the next
// layer is in flight at a time. A client that does not read is held back, not buffered without
// end: a write that finds more than `limit` bytes pending while a flush is in flight completes
// only when the flush does, and `pending` is flushed corked or not once it passes `limit`.
// Beast makes one write at a time, so at most one handler is ever held.
//
// Everything runs on the stream's executor (serve's io thread).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/websocket/teardown.hpp>

namespace orch::serve {

template <class NextLayer>
class corked_stream {
  using error_code = boost::beast::error_code;

  // A write's handler held back by a full buffer, or a teardown waiting for the last flush;
  // erased because Beast's handlers are move-only types of its own.
  struct waiter {
    virtual ~waiter() = default;
    virtual void resume(error_code ec) = 0;
  };
  template <class Fn>
  struct waiter_of final : waiter {
    explicit waiter_of(Fn f) : fn(std::move(f)) {}
    void resume(error_code ec) override { fn(ec); }
    Fn fn;
  };
  template <class Fn>
  static std::unique_ptr<waiter> wait_with(Fn fn) {
    return std::make_unique<waiter_of<Fn>>(std::move(fn));
  }

  // Outlives the stream while a flush is in flight: the flush's handler finds `gone` set and
  // touches nothing else.
  struct state {
    std::string pending, sending;  // written and not yet flushed; in flight
    bool corked = false, flushing = false, gone = false, flush_posted = false;
    error_code failed;  // the flush that failed; every later write gets it
    std::size_t flushes = 0;
  };
  // What waits for the flush in flight. Only that flush's handler owns it, as the reactor owns
  // a socket's pending handler: a held Beast handler owns the session that owns this stream,
  // and a stream that owned its waiters would keep that cycle alive once the io_context drops
  // the flush at shutdown.
  struct waiters {
    std::unique_ptr<waiter> held;   // a write over the limit
    std::unique_ptr<waiter> drain;  // a teardown
  };

 public:
  using executor_type = typename NextLayer::executor_type;
  using next_layer_type = NextLayer;

  template <class... Args>
  explicit corked_stream(std::size_t limit, Args&&... args)
      : next_(std::forward<Args>(args)...), limit_(limit), st_(std::make_shared<state>()) {}
  ~corked_stream() {
    st_->gone = true;
  }
  corked_stream(corked_stream&&) = delete;

  NextLayer& next_layer() { return next_; }
  const NextLayer& next_layer() const { return next_; }
  executor_type get_executor() { return next_.get_executor(); }

  void cork() { st_->corked = true; }
  void uncork() {
    st_->corked = false;
    if (std::exchange(st_->flush_posted, true)) return;
    boost::asio::post(next_.get_executor(), [this, keep = st_] {
      keep->flush_posted = false;
      if (!keep->gone) flush();
    });
  }
  // Writes made to the next layer so far, and bytes written to this one and not yet sent.
  std::size_t flushes() const { return st_->flushes; }
  std::size_t buffered() const { return st_->pending.size() + st_->sending.size(); }

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return next_.async_read_some(buffers, std::forward<Token>(token));
  }

  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) { start_write(std::move(handler), b); }, token,
        buffers);
  }

  // The teardown after the close handshake: whatever is pending (the close frame among it)
  // leaves first, then the next layer is torn down.
  template <class Handler>
  friend void async_teardown(boost::beast::role_type role, corked_stream& s, Handler&& handler) {
    s.st_->corked = false;
    s.flush();
    auto teardown = [&next = s.next_, role, h = std::forward<Handler>(handler)](
                        error_code) mutable {
      using boost::beast::websocket::async_teardown;
      async_teardown(role, next, std::move(h));
    };
    if (!s.st_->flushing) return teardown(error_code());
    s.waiting_.lock()->drain = wait_with(std::move(teardown));
  }

 private:
  template <class Handler, class Buffers>
  void start_write(Handler handler, const Buffers& buffers) {
    const std::size_t n = boost::asio::buffer_size(buffers);
    if (st_->failed) return complete(std::move(handler), st_->failed, 0);
    const std::size_t at = st_->pending.size();
    st_->pending.resize(at + n);
    boost::asio::buffer_copy(boost::asio::buffer(&st_->pending[at], n), buffers);
    flush();
    if (st_->pending.size() <= limit_) return complete(std::move(handler), error_code(), n);
    waiting_.lock()->held = wait_with([this, n, h = std::move(handler)](error_code ec) mutable {
      complete(std::move(h), ec, ec ? 0 : n);
    });
  }

  template <class Handler>
  void complete(Handler handler, error_code ec, std::size_t n) {
    auto ex = boost::asio::get_associated_executor(handler, next_.get_executor());
    boost::asio::post(ex, boost::beast::bind_front_handler(std::move(handler), ec, n));
  }

  void flush() {
    state& s = *st_;
    if (s.flushing || s.failed || s.pending.empty() || (s.corked && s.pending.size() <= limit_))
      return;
    s.sending.swap(s.pending);
    s.pending.clear();
    s.flushing = true;
    ++s.flushes;
    auto w = std::make_shared<waiters>();
    waiting_ = w;
    boost::asio::async_write(next_, boost::asio::buffer(s.sending),
                             [this, keep = st_, w](error_code ec, std::size_t) {
                               if (!keep->gone) flushed(ec, std::move(*w));
                             });
  }

  void flushed(error_code ec, waiters w) {
    state& s = *st_;
    s.flushing = false;
    s.sending.clear();
    if (ec) {
      s.failed = ec;
      s.pending.clear();
    }
    flush();  // what was written meanwhile, if uncorked or over the limit
    if (w.held) w.held->resume(s.failed);
    if (w.drain && s.flushing) waiting_.lock()->drain = std::move(w.drain);
    if (w.drain) w.drain->resume(s.failed);
  }

  NextLayer next_;
  std::size_t limit_;
  std::shared_ptr<state> st_;
  std::weak_ptr<waiters> waiting_;  // the flush in flight's
};

}  // namespace orch::serve
