// Empty request/response round trip over the channel, over a call lane's socket alone and over a
// whole call lane (its shared page's boxes, polled as the lane polls), p50 and p99,
// against its floor: a raw socketpair round trip of the same number of bytes between two
// processes, measured three ways (socket_floors.hpp) in the same interleaved blocks; the lowest is
// the floor. Beside them, a futex doorbell over shared memory (doorbell_floor.hpp): what a lane
// without a socket could reach. Target (docs/performance.md): p50 ratio <= 1.5.
//
//   bench_ipc_round_trip [iterations]     (default 20000 of each, after 2000 warm-up round trips,
//                                          in blocks of 500, the order rotating per block)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench_stats.hpp"
#include "doorbell_floor.hpp"
#include "interleaved_floors.hpp"
#include "orch/ipc/channel.hpp"
#include "orch/ipc/lane_endpoint.hpp"
#include "orch/ipc/lane_socket.hpp"
#include "orch/support/poll_until.hpp"

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

// Answers `request` on `lane` (a lane_socket or a lane_endpoint) with an empty map.
template <typename Lane>
bool answer_empty(Lane& lane, const message& request) {
  frame_header answer;
  answer.type = request.header.type;
  answer.flags = frame_flags::response;
  answer.request_id = request.header.request_id;
  return lane.send(answer, json::object(), lane_socket::clock::now() + std::chrono::seconds(10))
      .ok();
}

// The lane's echo process: reads each frame and answers it with an empty map, blocking, as a
// worker's node thread reads its lane (without its poll of the doorbell).
pid_t start_lane_echo(int fd, int other) {
  const pid_t child = ::fork();
  if (child == 0) {
    // Only its own end: a copy of the channel's or a floor's end would keep its echo from its
    // end of file.
    (void)other;
    ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
    lane_socket lane(unique_fd(fd), "echo", 0);
    while (auto m = lane.receive(std::nullopt)) {
      if (!answer_empty(lane, *m)) break;
    }
    ::_exit(0);
  }
  ::close(fd);
  return child;
}

// A whole lane's echo process: the worker's end, polled for 100 us before it sleeps, as a worker's
// node thread polls its lane (node_requests.cpp).
pid_t start_endpoint_echo(int fd, lane_memory& page) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int keep[] = {fd, page.fd()};
    for (int other = 3; other < 1024; ++other) {
      if (std::find(std::begin(keep), std::end(keep), other) == std::end(keep)) ::close(other);
    }
    auto mine = lane_memory::attach(unique_fd(::dup(page.fd())));
    if (!mine) ::_exit(1);
    lane_endpoint lane(lane_socket(unique_fd(fd), "echo", 0), std::move(*mine), lane_side::worker);
    while (true) {
      orch::poll_until([&] { return lane.waiting(); }, std::chrono::microseconds(100),
                       [&] { return lane.shares_cpu(); });
      auto m = lane.receive(std::nullopt);
      if (!m || !answer_empty(lane, *m)) break;
    }
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
  int lane_fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lane_fds);
  const pid_t lane_child = start_lane_echo(lane_fds[1], lane_fds[0]);
  auto lane = std::make_shared<lane_socket>(unique_fd(lane_fds[0]), "bench", 0);
  std::uint64_t lane_id = 0;
  kinds.push_back({"lane socket request/response", [&] {
                     const auto start = clock::now();
                     frame_header h;
                     h.type = static_cast<std::uint16_t>(message_type::ping);
                     h.request_id = ++lane_id;
                     const auto deadline = lane_socket::clock::now() + std::chrono::seconds(10);
                     if (!lane->send(h, json::object(), deadline) || !lane->receive(deadline)) {
                       std::fprintf(stderr, "bench: the lane's echo failed\n");
                       std::exit(2);
                     }
                     return micros(clock::now() - start);
                   }});
  int endpoint_fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, endpoint_fds);
  auto page = lane_memory::create();
  if (!page) {
    std::fprintf(stderr, "bench: %s\n", page.err().message.c_str());
    return 2;
  }
  const pid_t endpoint_child = start_endpoint_echo(endpoint_fds[1], *page);
  auto endpoint = std::make_shared<lane_endpoint>(
      lane_socket(unique_fd(endpoint_fds[0]), "bench", 0), std::move(*page), lane_side::host);
  kinds.push_back({"lane request/response (boxes, polled)", [&] {
                     const auto start = clock::now();
                     frame_header h;
                     h.type = static_cast<std::uint16_t>(message_type::ping);
                     h.request_id = ++lane_id;
                     const auto deadline = lane_socket::clock::now() + std::chrono::seconds(10);
                     if (!endpoint->send(h, json::object(), deadline)) std::exit(2);
                     orch::poll_until([&] { return endpoint->waiting(); },
                                      std::chrono::microseconds(50),
                                      [&] { return endpoint->shares_cpu(); });
                     if (!endpoint->receive(deadline)) {
                       std::fprintf(stderr, "bench: the whole lane's echo failed\n");
                       std::exit(2);
                     }
                     return micros(clock::now() - start);
                   }});
  auto doorbell = std::make_shared<doorbell_floor>(std::chrono::microseconds(100));
  kinds.push_back({"futex doorbell over shared memory",
                   [doorbell] { return doorbell->round_trip_us(); }, [doorbell] { doorbell->pin(); },
                   [doorbell] { doorbell->unpin(); }});
  interleave(kinds, iterations, 500);
  host->close("benchmark done");
  io.run_for(std::chrono::milliseconds(50));
  ::waitpid(channel_child, nullptr, 0);
  lane.reset();
  ::waitpid(lane_child, nullptr, 0);
  endpoint->shut_down();
  endpoint.reset();
  ::waitpid(endpoint_child, nullptr, 0);

  std::printf("round trip between two processes, %zu-byte frames, %d samples of each\n",
              frame_bytes, iterations);
  const double floor50 = report_floors(kinds);
  const std::size_t n = kinds.size();
  const double ch50 = report(kinds[n - 4], floor50);
  report(kinds[n - 3], floor50);
  report(kinds[n - 2], floor50);
  report(kinds[n - 1], floor50);
  std::printf("  target: the channel's p50 <= 1.5x the floor; against blocking reads: %.2fx\n",
              ch50 / percentile(kinds.front().samples, 0.5));
  kinds.clear();  // closes each floor's socket and waits for its echo
  return 0;
}
