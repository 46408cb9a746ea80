// Empty request/response round trip over the channel, p50 and p99, against its floor: a raw
// socketpair ping-pong of the same number of bytes, in the same binary and run, between two
// processes. Target (issue 4): p50 ratio <= 1.5.
//
//   bench_ipc_round_trip [iterations]     (default 20000, after 2000 warm-up round trips)
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

std::vector<double> raw_ping_pong(std::size_t bytes, int iterations) {
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::vector<char> buffer(bytes);
    while (read_all(fds[1], buffer.data(), bytes) && write_all(fds[1], buffer.data(), bytes)) {
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<char> buffer(bytes, 'x');
  std::vector<double> samples;
  for (int i = -2000; i < iterations; ++i) {
    const auto start = clock::now();
    write_all(fds[0], buffer.data(), bytes);
    read_all(fds[0], buffer.data(), bytes);
    if (i >= 0) samples.push_back(micros(clock::now() - start));
  }
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return samples;
}

std::vector<double> channel_round_trip(int iterations) {
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    boost::asio::io_context io;
    channel::socket_type socket(io);
    socket.assign(boost::asio::local::stream_protocol(), fds[1]);
    auto peer = channel::create(std::move(socket), channel_options{});
    std::weak_ptr<channel> weak = peer;
    peer->start([weak](message m) {
      if (auto self = weak.lock()) self->respond(m.header, json::object());
    });
    peer.reset();
    io.run();
    ::_exit(0);
  }
  ::close(fds[1]);
  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), fds[0]);
  auto host = channel::create(std::move(socket), channel_options{});
  host->start([](message) {});
  std::vector<double> samples;
  for (int i = -2000; i < iterations; ++i) {
    bool done = false;
    const auto start = clock::now();
    host->request(message_type::ping, json::object(), std::chrono::seconds(10),
                  [&](orch::result<message>) { done = true; });
    while (!done) io.run_one();
    if (i >= 0) samples.push_back(micros(clock::now() - start));
  }
  host->close("benchmark done");
  io.run_for(std::chrono::milliseconds(50));
  ::waitpid(child, nullptr, 0);
  return samples;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  // The empty request on the wire: the 32-byte header plus an empty CBOR map.
  const std::size_t frame_bytes = frame_header_size + encode_body(json::object()).size();
  const auto raw = raw_ping_pong(frame_bytes, iterations);
  const auto framed = channel_round_trip(iterations);
  const double raw50 = percentile(raw, 0.50), raw99 = percentile(raw, 0.99);
  const double ch50 = percentile(framed, 0.50), ch99 = percentile(framed, 0.99);
  std::printf("round trip, %zu-byte frames, %d iterations\n", frame_bytes, iterations);
  std::printf("  raw socketpair ping-pong (floor): p50 %.2f us  p99 %.2f us\n", raw50, raw99);
  std::printf("  channel ping request/response:    p50 %.2f us  p99 %.2f us\n", ch50, ch99);
  std::printf("  ratio channel/floor:              p50 %.2f     p99 %.2f   (target p50 <= 1.5)\n",
              ch50 / raw50, ch99 / raw99);
  return 0;
}
