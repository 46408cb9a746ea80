// orch::ipc across real processes: segments reach a worker over SCM_RIGHTS, leases outlive their
// producer, receivers reject bad descriptors, frame violations close the connection without a
// crash, and the host reads control blocks without a message. Every test also checks that no
// /dev/shm entry and no fd is left behind (leak_checked_test).
#include <gtest/gtest.h>

#include <memory>

#include <boost/asio/io_context.hpp>

#include "leak_check.hpp"
#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/lease_table.hpp"
#include "peer_process.hpp"

namespace orch::ipc {
namespace {

using namespace std::chrono_literals;
using testing::inherited_pair;
using testing::peer_process;

// One spawned channel peer with its channel and fd socket, seen from the host.
struct channel_peer {
  inherited_pair link;
  inherited_pair fd_link;
  std::unique_ptr<peer_process> process;
  std::shared_ptr<channel> ch;
  std::optional<error> closed;

  channel_peer(boost::asio::io_context& io, const char* name) {
    process = std::make_unique<peer_process>(std::vector<std::string>{
        "channel", std::to_string(link.theirs.get()), std::to_string(fd_link.theirs.get())});
    link.theirs.reset();
    fd_link.theirs.reset();
    channel::socket_type socket(io);
    socket.assign(boost::asio::local::stream_protocol(), link.ours.release());
    channel_options o;
    o.name = name;
    ch = channel::create(std::move(socket), o);
    ch->start([](message) {}, [this](const error& e) { closed = e; });
  }

  // Sends a request and runs the io_context until it is answered.
  result<message> call(boost::asio::io_context& io, message_type type, json body) {
    std::optional<result<message>> answer;
    ch->request(type, std::move(body), 10s, [&](result<message> r) { answer = std::move(r); });
    EXPECT_TRUE(testing::run_until(io, [&] { return answer.has_value(); }));
    if (!answer) return error{"no_answer", "test timed out"};
    return std::move(*answer);
  }

  // Sends a segment fd on the fd socket, then segment_attach on the channel, announcing the
  // segment's own size unless `announced_size` says otherwise.
  result<message> attach(boost::asio::io_context& io, const pool_segment& segment,
                         std::optional<std::uint64_t> announced_size = std::nullopt) {
    const std::byte tag{1};
    const int fd = segment.fd();
    EXPECT_TRUE(send_fds(fd_link.ours.get(), {&tag, 1}, {&fd, 1}).ok());
    return call(io, message_type::segment_attach,
                json{{"segment", segment.id()},
                     {"total_size", announced_size.value_or(segment.total_size())}});
  }

  result<message> grant(boost::asio::io_context& io, const buffer_descriptor& d,
                        std::optional<int> write = std::nullopt) {
    json body{{"descriptor", descriptor_to_json(d)}};
    if (write) body["write"] = *write;
    return call(io, message_type::lease_grant, std::move(body));
  }

  void shutdown(boost::asio::io_context& io) {
    (void)call(io, message_type::shutdown, json::object());
    testing::run_until(io, [&] { return closed.has_value(); });
    const int status = process->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
};

class ipc_processes : public testing::leak_checked_test {
 protected:
  void SetUp() override {
    testing::leak_checked_test::SetUp();
    io = std::make_unique<boost::asio::io_context>();
  }
  void TearDown() override {
    io.reset();
    testing::leak_checked_test::TearDown();
  }
  std::unique_ptr<boost::asio::io_context> io;
};

TEST_F(ipc_processes, worker_maps_and_registers_a_received_segment_once) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  auto d = pool.allocate(100);
  ASSERT_TRUE(d.ok());
  channel_peer peer(*io, "worker");
  auto attached = peer.attach(*io, pool.segment(0));
  ASSERT_TRUE(attached.ok()) << attached.err().message;
  EXPECT_EQ(attached->body["segment"], d->segment);
  EXPECT_EQ(attached->body["registrations"], 1);
  auto again = peer.attach(*io, pool.segment(0));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, "duplicate_segment");
  peer.shutdown(*io);
}

TEST_F(ipc_processes, worker_refuses_a_segment_fd_whose_size_differs_from_the_announcement) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  ASSERT_TRUE(pool.allocate(100).ok());
  channel_peer peer(*io, "worker");
  auto refused = peer.attach(*io, pool.segment(0), pool.segment(0).total_size() * 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "size_mismatch");
  // Nothing stayed mapped: the same segment, announced truthfully, attaches and registers once.
  auto attached = peer.attach(*io, pool.segment(0));
  ASSERT_TRUE(attached.ok()) << attached.err().message;
  EXPECT_EQ(attached->body["registrations"], 1);
  peer.shutdown(*io);
}

TEST_F(ipc_processes, lease_survives_the_death_of_the_process_that_produced_it) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  lease_table leases(pool);
  constexpr process_id producer_id = 1, consumer_id = 2;
  // The producer fills its output block, which the host then hands to the consumer.
  auto output = leases.allocate(producer_id, 64 * 1024);
  ASSERT_TRUE(output.ok());
  channel_peer producer(*io, "producer");
  channel_peer consumer(*io, "consumer");
  ASSERT_TRUE(producer.attach(*io, pool.segment(0)).ok());
  ASSERT_TRUE(consumer.attach(*io, pool.segment(0)).ok());
  auto written = producer.grant(*io, *output, 0xab);
  ASSERT_TRUE(written.ok()) << written.err().message;
  ASSERT_TRUE(leases.acquire(*output, consumer_id).ok());

  producer.process->kill(SIGKILL);
  ASSERT_TRUE(testing::run_until(*io, [&] { return producer.closed.has_value(); }));
  producer.process->wait();
  EXPECT_EQ(leases.release_process(producer_id), 1u);

  // Still valid, in limbo, with the producer's bytes.
  EXPECT_EQ(leases.limbo_blocks(), 1u);
  auto read = consumer.grant(*io, *output);
  ASSERT_TRUE(read.ok()) << read.err().message;
  EXPECT_EQ(read->body["first"], 0xab);
  EXPECT_EQ(read->body["last"], 0xab);

  // The last release frees it; from then on the descriptor is stale in the consumer too.
  ASSERT_TRUE(leases.release(*output, consumer_id).ok());
  auto stale = consumer.grant(*io, *output);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.err().code, "stale_generation");
  consumer.shutdown(*io);
}

TEST_F(ipc_processes, receiver_rejects_out_of_bounds_and_stale_descriptors) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  auto live = pool.allocate(8192);
  auto freed = pool.allocate(4096);
  ASSERT_TRUE(live.ok() && freed.ok());
  ASSERT_TRUE(pool.deallocate(*freed).ok());
  channel_peer peer(*io, "worker");
  ASSERT_TRUE(peer.attach(*io, pool.segment(0)).ok());

  auto code = [&](buffer_descriptor d) {
    auto r = peer.grant(*io, d);
    return r.ok() ? std::string("ok") : r.err().code;
  };
  EXPECT_EQ(code(*live), "ok");
  buffer_descriptor past_segment = *live;
  past_segment.offset = 1 << 20;
  EXPECT_EQ(code(past_segment), "out_of_bounds");
  buffer_descriptor past_block = *live;
  past_block.size = 8193;
  EXPECT_EQ(code(past_block), "out_of_bounds");
  buffer_descriptor wrapping = *live;
  wrapping.size = ~std::uint64_t{0};
  EXPECT_EQ(code(wrapping), "out_of_bounds");
  EXPECT_EQ(code(*freed), "stale_generation");
  buffer_descriptor other_segment = *live;
  other_segment.segment = 9;
  EXPECT_EQ(code(other_segment), "unknown_segment");
  peer.shutdown(*io);
}

TEST_F(ipc_processes, worker_cannot_write_allocator_metadata_and_its_crash_corrupts_nothing) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  auto d = pool.allocate(4096);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(pool.segment(0).metadata_writable());
  const std::vector<std::byte> before(pool.segment(0).metadata().begin(),
                                      pool.segment(0).metadata().end());
  channel_peer peer(*io, "worker");
  ASSERT_TRUE(peer.attach(*io, pool.segment(0)).ok());
  std::optional<result<message>> answer;
  peer.ch->request(message_type::lease_grant,
                   json{{"descriptor", descriptor_to_json(*d)}, {"corrupt_metadata", true}}, 10s,
                   [&](result<message> r) { answer = std::move(r); });
  ASSERT_TRUE(testing::run_until(*io, [&] { return answer.has_value(); }));
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->err().code, "peer_lost");
  const int status = peer.process->wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  const std::vector<std::byte> after(pool.segment(0).metadata().begin(),
                                     pool.segment(0).metadata().end());
  EXPECT_TRUE(before == after) << "the worker changed the block table";
  EXPECT_TRUE(pool.validate(*d).ok());
  EXPECT_TRUE(pool.allocate(4096).ok());
}

// Writes one bad header to a channel peer and returns what the peer reported; the peer must
// close the connection and exit normally.
std::string violation(boost::asio::io_context& io, frame_header h) {
  inherited_pair link, fd_link;
  peer_process peer(
      {"channel", std::to_string(link.theirs.get()), std::to_string(fd_link.theirs.get())});
  link.theirs.reset();
  fd_link.theirs.reset();
  const header_bytes bytes = encode_header(h);
  EXPECT_EQ(::write(link.ours.get(), bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  char c;
  EXPECT_EQ(::read(link.ours.get(), &c, 1), 0) << "the peer should close the connection";
  const std::string said = peer.read_stdout();
  const int status = peer.wait();
  EXPECT_TRUE(WIFEXITED(status)) << "peer crashed instead of closing";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  (void)io;
  return said;
}

TEST_F(ipc_processes, bad_magic_closes_the_connection_without_a_crash) {
  frame_header h;
  h.magic = 0xdeadbeef;
  EXPECT_EQ(violation(*io, h), "closed bad_magic\n");
}

TEST_F(ipc_processes, bad_version_closes_the_connection_without_a_crash) {
  frame_header h;
  h.version = protocol_version + 1;
  EXPECT_EQ(violation(*io, h), "closed bad_version\n");
}

TEST_F(ipc_processes, oversize_length_closes_the_connection_without_a_crash) {
  frame_header h;
  h.type = static_cast<std::uint16_t>(message_type::ping);
  h.body_length = default_max_body + 1;
  EXPECT_EQ(violation(*io, h), "closed oversize\n");
}

TEST_F(ipc_processes, host_reads_a_worker_control_block_without_a_message) {
  auto control = control_segment::create(1 << 30, 4);
  ASSERT_TRUE(control.ok());
  inherited_pair fd_link;
  // The slot is claimed for the peer's pid once it exists; the peer only reserves afterwards.
  // On a fresh segment the first claim gets slot 0.
  peer_process peer({"budget", std::to_string(fd_link.theirs.get()), "0", "4096", "1"});
  fd_link.theirs.reset();
  auto id = read_process_identity(peer.pid());
  ASSERT_TRUE(id.ok());
  auto slot = control->claim_slot(*id);
  ASSERT_TRUE(slot.ok());
  ASSERT_EQ(*slot, 0u);
  ASSERT_TRUE(control->grow_grant(0, 4096).ok());
  const std::byte tag{1};
  const int fds[2] = {control->fd(), control->slot_fd(0)};
  ASSERT_TRUE(send_fds(fd_link.ours.get(), {&tag, 1}, fds).ok());
  char answer = 0;
  ASSERT_EQ(::read(fd_link.ours.get(), &answer, 1), 1);
  EXPECT_EQ(answer, 'y');
  EXPECT_EQ(control->block(0).heartbeat.load(), 1u);
  auto stats = control->block(0).read();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->memory_manager, memory_manager_kind::ledger);
  EXPECT_EQ(get_text(stats->memory_manager_reason), "device is cpu");
  EXPECT_EQ(stats->pinned_bytes, 4096u);
  EXPECT_EQ(stats->call_count, 7u);
}

TEST_F(ipc_processes, worker_cannot_write_the_control_header_and_its_crash_changes_nothing) {
  auto control = control_segment::create(1 << 30, 4);
  ASSERT_TRUE(control.ok());
  EXPECT_TRUE(control->header_writable());
  const std::vector<std::byte> before(control->header_page().begin(), control->header_page().end());
  inherited_pair fd_link;
  peer_process peer(
      {"budget", std::to_string(fd_link.theirs.get()), "0", "4096", "1", "write_header_page"});
  fd_link.theirs.reset();
  auto id = read_process_identity(peer.pid());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(control->claim_slot(*id).ok());
  const std::byte tag{1};
  const int fds[2] = {control->fd(), control->slot_fd(0)};
  ASSERT_TRUE(send_fds(fd_link.ours.get(), {&tag, 1}, fds).ok());
  // The header page is read-only in the worker: its write faults and it dies before answering.
  char answer = 0;
  EXPECT_EQ(::read(fd_link.ours.get(), &answer, 1), 0);
  const int status = peer.wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  const std::vector<std::byte> after(control->header_page().begin(), control->header_page().end());
  EXPECT_EQ(before, after);
  EXPECT_EQ(control->reclaim_dead(), (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(control->total_reserved(), 0u);
}

}  // namespace
}  // namespace orch::ipc
