// Empty request/response round trip over the channel, p50 and p99, against its floor: a raw
// socketpair round trip of the same number of bytes between two processes, measured three ways
// (socket_floors.hpp) in the same interleaved blocks; the lowest is the floor. Target
// (docs/performance.md): p50 ratio <= 1.5.
//
//   bench_ipc_round_trip [iterations]     (default 20000 of each, after 2000 warm-up round trips,
//                                          in blocks of 500, the order rotating per block)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench_stats.hpp"
#include "interleaved_floors.hpp"
#include "orch/ipc/channel.hpp"

namespace {

using namespace orch::ipc;
using namespace orch::ipc::bench;

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
  using namespace orch::bench_floors;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  // The empty request on the wire: the 32-byte header plus an empty CBOR map.
  const std::size_t frame_bytes = frame_header_size + encode_body(json::object()).size();
  std::vector<measured_kind> kinds = socket_floor_kinds(frame_bytes);
  int channel_fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel_fds);
  const pid_t channel_child = start_channel_echo(channel_fds[1], channel_fds[0]);

  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), channel_fds[0]);
  auto host = channel::create(std::move(socket), channel_options{});
  host->start([](message) {});
  kinds.push_back({"channel ping request/response", [&] {
                     const auto start = clock::now();
                     bool done = false;
                     host->request(message_type::ping, json::object(), std::chrono::seconds(10),
                                   [&](orch::result<message>) { done = true; });
                     while (!done) io.run_one();
                     return micros(clock::now() - start);
                   }});
  interleave(kinds, iterations, 500);
  host->close("benchmark done");
  io.run_for(std::chrono::milliseconds(50));
  ::waitpid(channel_child, nullptr, 0);

  std::printf("round trip between two processes, %zu-byte frames, %d samples of each\n",
              frame_bytes, iterations);
  const double floor50 = report_floors(kinds);
  const double ch50 = report(kinds.back(), floor50);
  std::printf("  target: the channel's p50 <= 1.5x the floor; against blocking reads: %.2fx\n",
              ch50 / percentile(kinds.front().samples, 0.5));
  kinds.clear();  // closes each floor's socket and waits for its echo
  return 0;
}
