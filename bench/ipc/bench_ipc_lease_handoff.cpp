// Lease handoff of a 1 MiB and a 1 GiB pinned-pool buffer from the host to a worker process:
// the host takes a lease for the worker and sends the descriptor; the worker validates it
// against its own mapping, touches the first and last byte, and answers; the host drops the
// lease. No byte is copied, so the time must not depend on the size (target ratio <= 1.1).
// The floor for scale is memcpy of the same buffers in this process.
//
//   bench_ipc_lease_handoff [iterations]     (default 5000)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench_stats.hpp"
#include "orch/ipc/channel.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/lease_table.hpp"
#include "orch/ipc/segment_table.hpp"

namespace {

using namespace orch::ipc;
using namespace orch::ipc::bench;
constexpr std::uint64_t mib = 1 << 20;
constexpr std::uint64_t gib = std::uint64_t{1} << 30;

[[noreturn]] void worker(int channel_fd, int fd_socket) {
  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), channel_fd);
  noop_pin_registrar registrar;
  segment_table table(registrar);
  auto peer = channel::create(std::move(socket), channel_options{});
  std::weak_ptr<channel> weak = peer;
  peer->start([&, weak](message m) {
    auto self = weak.lock();
    if (!self) return;
    if (m.header.type == static_cast<std::uint16_t>(message_type::segment_attach)) {
      auto got = recv_fds(fd_socket, 1, 1);
      if (got && got->fds.size() == 1 &&
          table.attach(std::move(got->fds[0]), m.body["segment"].get<std::uint32_t>(),
                       m.body["total_size"].get<std::uint64_t>())) {
        self->respond(m.header, json::object());
      } else {
        self->respond_error(m.header, {"attach_failed", "could not attach"});
      }
      return;
    }
    auto d = descriptor_from_json(m.body["descriptor"]);
    auto bytes = d ? table.bytes(*d) : orch::result<std::span<std::byte>>(d.err());
    if (!bytes) {
      self->respond_error(m.header, bytes.err());
      return;
    }
    const volatile std::byte first = bytes->front();
    const volatile std::byte last = bytes->back();
    (void)first;
    (void)last;
    self->respond(m.header, json::object());
  });
  peer.reset();
  io.run();
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 5000;
  int link[2], fd_link[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link);
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd_link);
  // Fork before the pool exists: the worker gets the segment only through SCM_RIGHTS.
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(link[0]);
    ::close(fd_link[0]);
    worker(link[1], fd_link[1]);
  }
  ::close(link[1]);
  ::close(fd_link[1]);

  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{gib + 2 * mib, 4096, 1}, registrar);
  lease_table leases(pool);
  auto small = leases.allocate(0, mib);
  auto large = leases.allocate(0, gib);
  if (!small || !large) {
    std::fprintf(stderr, "allocation failed\n");
    return 1;
  }
  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), link[0]);
  auto host = channel::create(std::move(socket), channel_options{});
  host->start([](message) {});
  auto call = [&](message_type type, json body) {
    bool ok = false, done = false;
    host->request(type, std::move(body), std::chrono::seconds(30), [&](orch::result<message> r) {
      ok = r.ok();
      done = true;
    });
    while (!done) io.run_one();
    return ok;
  };
  const std::byte tag{1};
  const int segment_fd = pool.segment(0).fd();
  if (!send_fds(fd_link[0], {&tag, 1}, {&segment_fd, 1}).ok() ||
      !call(message_type::segment_attach,
            json{{"segment", 1}, {"total_size", pool.segment(0).total_size()}})) {
    std::fprintf(stderr, "attach failed\n");
    return 1;
  }
  auto handoff = [&](const buffer_descriptor& d) {
    std::vector<double> samples;
    for (int i = -200; i < iterations; ++i) {
      const auto start = clock::now();
      (void)leases.acquire(d, 1);
      const bool ok = call(message_type::lease_grant, json{{"descriptor", descriptor_to_json(d)}});
      (void)leases.release(d, 1);
      if (!ok) std::fprintf(stderr, "handoff failed\n");
      if (i >= 0) samples.push_back(micros(clock::now() - start));
    }
    return samples;
  };
  // Interleave the two sizes in rounds so drift hits both alike.
  std::vector<double> s_small, s_large;
  for (int round = 0; round < 4; ++round) {
    auto a = handoff(*small);
    auto b = handoff(*large);
    s_small.insert(s_small.end(), a.begin(), a.end());
    s_large.insert(s_large.end(), b.begin(), b.end());
  }
  host->close("benchmark done");
  io.run_for(std::chrono::milliseconds(50));
  ::close(fd_link[0]);
  ::waitpid(child, nullptr, 0);

  // Floor for scale: copying the bytes instead (memcpy between two private buffers).
  std::vector<char> from(64 * mib, 1), to(64 * mib, 0);
  std::vector<double> copy;
  for (int i = 0; i < 20; ++i) {
    const auto start = clock::now();
    std::memcpy(to.data(), from.data(), from.size());
    copy.push_back(micros(clock::now() - start));
  }
  const double copy_gib_per_s = (64.0 / 1024.0) / (percentile(copy, 0.5) / 1e6);
  const double p50_small = percentile(s_small, 0.5), p50_large = percentile(s_large, 0.5);
  std::printf("lease handoff host -> worker process, %zu samples per size\n", s_small.size());
  std::printf("  1 MiB: p50 %.2f us  p99 %.2f us\n", p50_small, percentile(s_small, 0.99));
  std::printf("  1 GiB: p50 %.2f us  p99 %.2f us\n", p50_large, percentile(s_large, 0.99));
  std::printf("  ratio 1 GiB / 1 MiB: p50 %.3f   (target <= 1.1)\n", p50_large / p50_small);
  std::printf("  memcpy floor: %.2f GiB/s, so copying 1 MiB would take %.1f us and 1 GiB %.1f ms\n",
              copy_gib_per_s, 1e6 / 1024.0 / copy_gib_per_s, 1e3 / copy_gib_per_s);
  return 0;
}
