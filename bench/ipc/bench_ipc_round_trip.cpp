// Empty request/response round trip over the channel, p50 and p99, against its floor: a raw
// socketpair ping-pong of the same number of bytes, in the same binary and run, between two
// processes. Target (docs/performance.md): p50 ratio <= 1.5.
//
//   bench_ipc_round_trip [iterations]     (default 20000 of each, after 2000 warm-up round trips,
//                                          in alternating blocks of 500)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench_stats.hpp"
#include "orch/ipc/channel.hpp"

namespace {

using namespace orch::ipc;
using namespace orch::ipc::bench;

bool read_all(int fd, void* buffer, std::size_t n) {
  auto* p = static_cast<char*>(buffer);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* buffer, std::size_t n) {
  const auto* p = static_cast<const char*>(buffer);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put <= 0) return false;
    p += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

// The floor's echo process: reads `bytes`, writes them back, until the socket closes.
pid_t start_raw_echo(int fd, int other, std::size_t bytes) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(other);
    std::vector<char> buffer(bytes);
    while (read_all(fd, buffer.data(), bytes) && write_all(fd, buffer.data(), bytes)) {
    }
    ::_exit(0);
  }
  ::close(fd);
  return child;
}

// The channel's echo process: answers every ping with an empty map.
pid_t start_channel_echo(int fd, int other) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(other);
    boost::asio::io_context io;
    channel::socket_type socket(io);
    socket.assign(boost::asio::local::stream_protocol(), fd);
    auto peer = channel::create(std::move(socket), channel_options{});
    std::weak_ptr<channel> weak = peer;
    peer->start([weak](message m) {
      if (auto self = weak.lock()) self->respond(m.header, json::object());
    });
    peer.reset();
    io.run();
    ::_exit(0);
  }
  ::close(fd);
  return child;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  // The empty request on the wire: the 32-byte header plus an empty CBOR map.
  const std::size_t frame_bytes = frame_header_size + encode_body(json::object()).size();
  int raw_fds[2], channel_fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, raw_fds);
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel_fds);
  const pid_t raw_child = start_raw_echo(raw_fds[1], raw_fds[0], frame_bytes);
  const pid_t channel_child = start_channel_echo(channel_fds[1], channel_fds[0]);

  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), channel_fds[0]);
  auto host = channel::create(std::move(socket), channel_options{});
  host->start([](message) {});
  std::vector<char> buffer(frame_bytes, 'x');
  auto raw_once = [&] {
    write_all(raw_fds[0], buffer.data(), frame_bytes);
    read_all(raw_fds[0], buffer.data(), frame_bytes);
  };
  auto channel_once = [&] {
    bool done = false;
    host->request(message_type::ping, json::object(), std::chrono::seconds(10),
                  [&](orch::result<message>) { done = true; });
    while (!done) io.run_one();
  };
  for (int i = 0; i < 2000; ++i) {  // warm-up
    raw_once();
    channel_once();
  }
  // Alternate blocks of the two, so load changes on the machine hit both alike.
  constexpr int block = 500;
  std::vector<double> raw, framed;
  for (int done = 0; done < iterations; done += block) {
    for (int i = 0; i < block; ++i) {
      const auto start = clock::now();
      raw_once();
      raw.push_back(micros(clock::now() - start));
    }
    for (int i = 0; i < block; ++i) {
      const auto start = clock::now();
      channel_once();
      framed.push_back(micros(clock::now() - start));
    }
  }
  host->close("benchmark done");
  io.run_for(std::chrono::milliseconds(50));
  ::close(raw_fds[0]);
  ::waitpid(raw_child, nullptr, 0);
  ::waitpid(channel_child, nullptr, 0);

  const double raw50 = percentile(raw, 0.50), raw99 = percentile(raw, 0.99);
  const double ch50 = percentile(framed, 0.50), ch99 = percentile(framed, 0.99);
  std::printf("round trip between two processes, %zu-byte frames, %zu samples each\n", frame_bytes,
              raw.size());
  std::printf("  raw socketpair ping-pong (floor): p50 %.2f us  p99 %.2f us\n", raw50, raw99);
  std::printf("  channel ping request/response:    p50 %.2f us  p99 %.2f us\n", ch50, ch99);
  std::printf("  ratio channel/floor:              p50 %.2f     p99 %.2f   (target p50 <= 1.5)\n",
              ch50 / raw50, ch99 / raw99);
  return 0;
}
