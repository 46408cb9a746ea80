// ipc_test_peer: the other process in the IPC integration and fault tests. It receives segment
// fds over SCM_RIGHTS like a worker, maps them, and answers on a framed channel, so the tests
// exercise real process boundaries (and real SIGKILLs) rather than threads.
//
//   ipc_test_peer channel <channel-fd> <fd-socket>
//       ping            -> {}
//       segment_attach  -> receives one fd on <fd-socket>, maps it: {segment, registrations}
//       lease_grant     -> validates the descriptor (error response with the typed code when
//                          invalid); with "write": fills the block; answers {first, last};
//                          with "corrupt_metadata": tries to overwrite the block table first
//       evict           -> never answered (a call still running when the peer is killed)
//       shutdown        -> {} and exit
//     When the connection closes it prints "closed <code>" and exits 0.
//
//   ipc_test_peer budget <fd-socket> <slot> <bytes> <pieces> [<misbehaviour>]
//       receives the control segment fd and its own slot's fd, reserves <bytes> in <pieces>
//       steps within the grant the host gave its slot, publishes a stats snapshot and a
//       heartbeat, answers 'y' (or 'n' when refused) on <fd-socket>, then waits to be killed.
//       Before answering, a misbehaving peer does one of:
//         claim=<n>          overwrites its slot's `reserved` word with <n> (a lying slot)
//         corrupt_header     tries every way to write the control memfd (a writable mmap of
//                            its fd and of a /proc/self/fd re-open, write(2), mprotect of its
//                            read-only mapping, a punched hole); answers 'y' only when every
//                            one was refused, else 'w'
//         write_header_page  writes through its read-only header mapping (dies by SIGSEGV)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/segment_table.hpp"
#include "orch/support/logging.hpp"

namespace {

using namespace orch::ipc;

int run_channel(int channel_fd, int fd_socket) {
  boost::asio::io_context io;
  channel::socket_type socket(io);
  socket.assign(boost::asio::local::stream_protocol(), channel_fd);
  counting_pin_registrar registrar;
  segment_table table(registrar);
  channel_options options;
  options.name = "peer";
  auto ch = channel::create(std::move(socket), options);
  std::weak_ptr<channel> weak = ch;
  ch->start(
      [&, weak](message m) {
        auto self = weak.lock();
        if (!self) return;
        switch (static_cast<message_type>(m.header.type)) {
          case message_type::ping:
            self->respond(m.header, json::object());
            break;
          case message_type::segment_attach: {
            auto got = recv_fds(fd_socket, 1, 1);
            if (!got) {
              self->respond_error(m.header, got.err());
              break;
            }
            if (got->fds.size() != 1) {
              self->respond_error(m.header, {"no_fd", "segment_attach came without an fd"});
              break;
            }
            auto id = table.attach(std::move(got->fds[0]), m.body["segment"].get<std::uint32_t>(),
                                   m.body["total_size"].get<std::uint64_t>());
            if (!id) {
              self->respond_error(m.header, id.err());
              break;
            }
            self->respond(m.header,
                          json{{"segment", *id}, {"registrations", registrar.registrations()}});
            break;
          }
          case message_type::lease_grant: {
            auto d = descriptor_from_json(m.body["descriptor"]);
            auto bytes = d ? table.bytes(*d) : orch::result<std::span<std::byte>>(d.err());
            if (!bytes) {
              self->respond_error(m.header, bytes.err());
              break;
            }
            if (m.body.contains("corrupt_metadata")) {
              // A buggy worker scribbling over allocator state: the metadata is mapped read-only
              // here, so this write faults and the worker dies instead.
              // Die by the plain signal (not a sanitizer's handler) and leave no core file.
              const rlimit no_core{0, 0};
              ::setrlimit(RLIMIT_CORE, &no_core);
              std::signal(SIGSEGV, SIG_DFL);
              const pool_segment* segment = table.find(d->segment);
              auto* meta = const_cast<std::byte*>(segment->metadata().data());
              std::memset(meta, 0xff, segment->metadata().size());
            }
            if (m.body.contains("write")) {
              std::memset(bytes->data(), m.body["write"].get<int>(), bytes->size());
            }
            self->respond(m.header, json{{"first", static_cast<unsigned>(bytes->front())},
                                         {"last", static_cast<unsigned>(bytes->back())}});
            break;
          }
          case message_type::shutdown:
            self->respond(m.header, json::object());
            self->close("shutdown requested");
            break;
          default:
            break;  // evict and the rest: never answered
        }
      },
      [&](const orch::error& e) {
        std::printf("closed %s\n", e.code.c_str());
        std::fflush(stdout);
        io.stop();
      });
  io.run();
  return 0;
}

int run_budget(int fd_socket, std::uint32_t slot, std::uint64_t bytes, std::uint64_t pieces,
               const std::string& misbehaviour) {
  auto got = recv_fds(fd_socket, 1, 2);
  if (!got || got->fds.size() != 2) return 2;
  auto control =
      control_segment::attach(std::move(got->fds[0]), std::move(got->fds[1]), slot);
  if (!control) return 3;
  budget_account account(*control, slot);
  bool ok = true;
  for (std::uint64_t i = 0; i < pieces && ok; ++i) {
    const std::uint64_t piece =
        i + 1 == pieces ? bytes - bytes / pieces * (pieces - 1) : bytes / pieces;
    ok = account.reserve(piece).ok();
  }
  stats_snapshot stats{};
  stats.memory_manager = memory_manager_kind::ledger;
  set_text(stats.memory_manager_reason, "device is cpu");
  stats.pinned_bytes = account.reserved();
  stats.call_count = 7;
  control->block(slot).publish(stats);
  control->block(slot).beat();
  if (misbehaviour.rfind("claim=", 0) == 0) {
    control->counters(slot).reserved.store(std::strtoull(misbehaviour.c_str() + 6, nullptr, 10));
  } else if (misbehaviour == "corrupt_header") {
    // The hostile pack's attack: the control memfd is sealed against later writers, so none of
    // these may get through, whatever fd or mapping it goes through.
    const std::uint64_t size = control->total_size();
    const std::string path = "/proc/self/fd/" + std::to_string(control->fd());
    const int reopened = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    bool wrote = false;
    for (const int fd : {control->fd(), reopened}) {
      if (fd < 0) continue;
      void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        std::memset(map, 0xff, size);
        ::munmap(map, size);
        wrote = true;
      }
      const std::string junk(static_cast<std::size_t>(size), '\xff');
      wrote = wrote || ::pwrite(fd, junk.data(), junk.size(), 0) > 0;
      wrote = wrote || ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                                   static_cast<off_t>(size)) == 0;
    }
    if (reopened >= 0) ::close(reopened);
    auto* header = const_cast<std::byte*>(control->header_page().data());
    wrote = wrote || ::mprotect(header, page_size(), PROT_READ | PROT_WRITE) == 0;
    ok = ok && !wrote;
    if (wrote) {
      const std::byte answer{'w'};
      if (::write(fd_socket, &answer, 1) != 1) return 4;
      while (true) ::pause();
    }
  } else if (misbehaviour == "write_header_page") {
    // A buggy worker writing through its attached header mapping: it is read-only, so this
    // faults. Die by the plain signal (not a sanitizer's handler) and leave no core file.
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    std::signal(SIGSEGV, SIG_DFL);
    std::memset(const_cast<std::byte*>(control->header_page().data()), 0xff,
                control->header_page().size());
  } else if (!misbehaviour.empty()) {
    return 5;
  }
  const std::byte answer{static_cast<unsigned char>(ok ? 'y' : 'n')};
  if (::write(fd_socket, &answer, 1) != 1) return 4;
  while (true) ::pause();  // held until the test kills it
}

}  // namespace

int main(int argc, char** argv) {
  orch::init_logging("ipc_test_peer");  // logs go to stderr; stdout carries the test protocol
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "channel" && argc == 4) return run_channel(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "budget" && (argc == 6 || argc == 7)) {
    return run_budget(std::atoi(argv[2]),
                      static_cast<std::uint32_t>(std::strtoul(argv[3], nullptr, 10)),
                      std::strtoull(argv[4], nullptr, 10), std::strtoull(argv[5], nullptr, 10),
                      argc == 7 ? argv[6] : "");
  }
  std::fprintf(stderr,
               "usage: ipc_test_peer channel <fd> <fd-socket> | budget <fd-socket> <slot> <bytes> "
               "<pieces> [<misbehaviour>]\n");
  return 64;
}
