// The layer under serve's WebSocket sessions that sends a corked burst in one write
// (orchestrator/serve/include/orch/serve/corked_stream.hpp), on real loopback TCP with Beast's WebSocket on both
// ends: a burst leaves in one write, and so do the writes queued before it is uncorked; a
// client's pings during a long burst get their pongs without tearing a frame; a client that does
// not read holds the writes back, then gets every byte; a reset peer fails the writes; a close
// after a burst sends the burst, then the close frame; a close from a client while writes are
// held back is answered after them; a held write does not keep its session alive once the
// io_context drops it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "orch/serve/corked_stream.hpp"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using orch::serve::corked_stream;

constexpr std::size_t limit = 64 << 10;

// Runs the io_context until `done` holds; a test whose condition never comes fails rather than
// hangs.
void run_until(net::io_context& io, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the condition never came";
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

std::string message(int i, std::size_t size) {
  std::string m = std::to_string(i) + ":";
  m.resize(size, static_cast<char>('a' + i % 26));
  return m;
}

struct ends {
  explicit ends(net::io_context& context, int socket_buffer = 0)
      : io(context), server(limit, io), client(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    auto& client_socket = beast::get_lowest_layer(client).socket();
    client_socket.open(tcp::v4());
    if (socket_buffer)
      client_socket.set_option(net::socket_base::receive_buffer_size(socket_buffer));
    client_socket.connect(acceptor.local_endpoint());
    acceptor.accept(beast::get_lowest_layer(server).socket());
    if (socket_buffer)
      beast::get_lowest_layer(server).socket().set_option(
          net::socket_base::send_buffer_size(socket_buffer));
    bool accepted = false, shook = false;
    server.async_accept([&](beast::error_code ec) { accepted = !ec; });
    client.async_handshake("127.0.0.1", "/ws", [&](beast::error_code ec) { shook = !ec; });
    run_until(io, [&] { return accepted && shook; });
  }

  corked_stream<beast::tcp_stream>& layer() { return server.next_layer(); }

  // Writes `messages` back to back, as serve's session does; `after` runs in the last one's
  // handler.
  void write_all(std::vector<std::string> messages, std::function<void()> after = {}) {
    auto queue = std::make_shared<std::vector<std::string>>(std::move(messages));
    auto next = std::make_shared<std::function<void(std::size_t)>>();
    *next = [this, queue, next, after](std::size_t i) {
      server.async_write(net::buffer((*queue)[i]), [=, this](beast::error_code ec, std::size_t) {
        ++written;
        max_buffered = std::max(max_buffered, layer().buffered());
        if (ec) write_error = ec;
        if (!ec && i + 1 < queue->size()) return (*next)(i + 1);
        *next = nullptr;  // the cycle through the lambda ends with the queue
        if (after) after();
      });
    };
    (*next)(0);
  }

  // Reads messages into `received` until the stream ends or fails (`read_error`).
  void read_all() {
    client.async_read(buffer, [this](beast::error_code ec, std::size_t) {
      if (ec) {
        read_error = ec;
        return;
      }
      received.push_back(beast::buffers_to_string(buffer.data()));
      buffer.consume(buffer.size());
      read_all();
    });
  }

  net::io_context& io;
  websocket::stream<corked_stream<beast::tcp_stream>> server;
  websocket::stream<beast::tcp_stream> client;
  beast::flat_buffer buffer;
  std::vector<std::string> received;
  beast::error_code read_error, write_error;
  std::size_t written = 0, max_buffered = 0;
};

// Runs the io_context until a period passes with no write completed: the socket buffers on both
// ends are full and the layer holds the next write back.
void run_until_writes_stop(ends& e) {
  std::size_t seen = ~std::size_t(0);
  run_until(e.io, [&] {
    const bool still = e.written == seen;
    seen = e.written;
    return still;
  });
}

std::vector<std::string> messages(int count, std::size_t size) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(message(i, size));
  return out;
}

TEST(corked_stream, a_burst_written_while_corked_leaves_in_one_write) {
  net::io_context io;
  ends e(io);
  const std::size_t before = e.layer().flushes();
  e.layer().cork();
  e.write_all(messages(8, 40), [&] { e.layer().uncork(); });
  e.read_all();
  run_until(e.io, [&] { return e.received.size() == 8; });
  EXPECT_EQ(e.received, messages(8, 40));
  EXPECT_EQ(e.layer().flushes() - before, 1u);
}

TEST(corked_stream, an_uncork_lets_the_handlers_already_queued_join_the_write) {
  net::io_context io;
  ends e(io);
  const std::size_t before = e.layer().flushes();
  e.layer().cork();
  e.write_all(messages(1, 40), [&] {
    // Queued before the uncork, as serve's next event is: it joins the first.
    net::post(e.io, [&] { e.write_all({message(1, 40)}); });
    e.layer().uncork();
  });
  e.read_all();
  run_until(e.io, [&] { return e.received.size() == 2; });
  EXPECT_EQ(e.received, messages(2, 40));
  EXPECT_EQ(e.layer().flushes() - before, 1u);
}

TEST(corked_stream, uncorked_writes_leave_at_once) {
  net::io_context io;
  ends e(io);
  const std::size_t before = e.layer().flushes();
  e.write_all(messages(3, 40));
  e.read_all();
  run_until(e.io, [&] { return e.received.size() == 3; });
  EXPECT_EQ(e.received, messages(3, 40));
  EXPECT_GE(e.layer().flushes() - before, 2u);  // the first left before the second was written
}

TEST(corked_stream, pings_during_a_long_burst_get_their_pongs_and_no_frame_is_torn) {
  net::io_context io;
  ends e(io, 16 << 10);
  constexpr int count = 300, pings = 20;
  int pongs = 0, pinged = 0;
  e.client.control_callback([&](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::pong) ++pongs;
  });
  beast::flat_buffer server_in;  // the server reads, so that Beast answers the pings
  e.server.async_read(server_in, [](beast::error_code, std::size_t) {});
  std::function<void()> ping = [&] {
    e.client.async_ping("p", [&](beast::error_code ec) {
      ASSERT_FALSE(ec) << ec.message();
      if (++pinged < pings) ping();
    });
  };
  e.layer().cork();  // the whole burst, over the limit many times
  e.write_all(messages(count, 20 << 10), [&] { e.layer().uncork(); });
  ping();
  e.read_all();
  run_until(e.io, [&] { return (e.received.size() == count && pongs == pings) || e.read_error; });
  ASSERT_FALSE(e.read_error) << e.read_error.message();
  EXPECT_EQ(e.received, messages(count, 20 << 10));
  EXPECT_EQ(pongs, pings);
}

TEST(corked_stream, a_client_that_does_not_read_holds_the_writes_back_then_gets_every_byte) {
  net::io_context io;
  ends e(io, 16 << 10);
  constexpr int count = 200;
  constexpr std::size_t size = 8 << 10;
  e.write_all(messages(count, size));
  run_until_writes_stop(e);  // buffers full on both ends
  ASSERT_GT(e.written, 0u);
  EXPECT_LT(e.written, static_cast<std::size_t>(count));  // 1.6 MiB was not taken into memory
  EXPECT_LE(e.max_buffered, 2 * (limit + size + 16));
  e.read_all();
  run_until(e.io, [&] { return e.received.size() == count || e.read_error; });
  EXPECT_EQ(e.received, messages(count, size));
  EXPECT_EQ(e.written, static_cast<std::size_t>(count));
  EXPECT_FALSE(e.write_error);
}

TEST(corked_stream, a_reset_peer_fails_the_writes_that_follow) {
  net::io_context io;
  ends e(io);
  auto& socket = beast::get_lowest_layer(e.client).socket();
  socket.set_option(net::socket_base::linger(true, 0));  // close sends a reset
  socket.close();
  std::function<void()> write = [&] {
    e.write_all(messages(1, 1 << 10), [&] {
      if (!e.write_error && e.written < 10000) write();
    });
  };
  write();
  run_until(e.io, [&] { return bool(e.write_error) || e.written >= 10000; });
  EXPECT_TRUE(e.write_error);
}

TEST(corked_stream, a_close_after_a_corked_burst_sends_the_burst_then_the_close_frame) {
  net::io_context io;
  ends e(io);
  const std::size_t before = e.layer().flushes();
  bool closed = false;
  beast::error_code close_error = websocket::error::closed;
  e.layer().cork();
  e.write_all(messages(3, 40), [&] {
    e.server.async_close(websocket::close_code::going_away, [&](beast::error_code ec) {
      close_error = ec;
      closed = true;
    });
    e.layer().uncork();  // as serve's session does when its queue is empty
  });
  e.read_all();
  run_until(e.io, [&] { return closed && e.read_error; });
  EXPECT_EQ(e.received, messages(3, 40));
  EXPECT_EQ(e.read_error, websocket::error::closed);
  EXPECT_EQ(e.client.reason().code, websocket::close_code::going_away);
  EXPECT_FALSE(close_error) << close_error.message();
  EXPECT_EQ(e.layer().flushes() - before, 1u);  // the close frame went with the burst
}

TEST(corked_stream, a_close_from_the_client_while_writes_are_held_back_is_answered_after_them) {
  net::io_context io;
  ends e(io, 16 << 10);
  beast::flat_buffer server_in;  // the server reads, so that Beast sees the client's close
  beast::error_code server_read = websocket::error::buffer_overflow;
  e.server.async_read(server_in, [&](beast::error_code ec, std::size_t) { server_read = ec; });
  e.write_all(messages(100, 8 << 10));
  run_until_writes_stop(e);  // the client does not read
  ASSERT_GT(e.layer().buffered(), 0u);
  // The client's close reads and drops what comes until the server's close frame, which the
  // server's teardown must not cut off: it is queued behind the held-back bytes.
  bool closed = false;
  beast::error_code close_error = websocket::error::buffer_overflow;
  e.client.async_close(websocket::close_code::normal, [&](beast::error_code ec) {
    close_error = ec;
    closed = true;
  });
  run_until(e.io, [&] { return closed && server_read != websocket::error::buffer_overflow; });
  EXPECT_FALSE(close_error) << close_error.message();
  EXPECT_EQ(server_read, websocket::error::closed);
}

// Writes `m` until a write fails, each handler owning the session as serve's do.
void write_forever(std::shared_ptr<ends> e, std::shared_ptr<const std::string> m) {
  e->server.async_write(net::buffer(*m), [e, m](beast::error_code ec, std::size_t) {
    ++e->written;
    if (!ec) write_forever(e, m);
  });
}

TEST(corked_stream, a_held_write_does_not_keep_its_session_alive_once_the_io_context_drops_it) {
  auto io = std::make_unique<net::io_context>();
  auto e = std::make_shared<ends>(*io, 16 << 10);
  const std::weak_ptr<ends> alive = e;
  write_forever(e, std::make_shared<const std::string>(message(0, 8 << 10)));
  run_until_writes_stop(*e);  // one is held, the flush before it in flight
  ASSERT_GT(e->layer().buffered(), limit);
  e.reset();
  EXPECT_FALSE(alive.expired());  // the held write's handler owns it
  io.reset();                     // as at shutdown: the flush in flight is dropped, not run
  EXPECT_TRUE(alive.expired());
}

}  // namespace
