// orch::ipc when a peer is SIGKILLed: pending requests fail promptly with peer_lost, and the
// host reclaims a dead process's budget slot to the exact byte. No /dev/shm entry and no fd may
// survive any test (leak_checked_test).
#include <gtest/gtest.h>

#include <fcntl.h>

#include <memory>

#include <boost/asio/io_context.hpp>

#include "leak_check.hpp"
#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "peer_process.hpp"

namespace orch::ipc {
namespace {

using namespace std::chrono_literals;
using testing::inherited_pair;
using testing::peer_process;

// The acceptance bound of issue 4: a pending request fails within 1 s of the peer's SIGKILL.
constexpr auto peer_lost_bound = 1s;

using ipc_faults = testing::leak_checked_test;

TEST_F(ipc_faults, pending_request_fails_with_peer_lost_within_one_second_of_sigkill) {
  auto io = std::make_unique<boost::asio::io_context>();
  {
    inherited_pair link, fd_link;
    peer_process peer(
        {"channel", std::to_string(link.theirs.get()), std::to_string(fd_link.theirs.get())});
    link.theirs.reset();
    fd_link.theirs.reset();
    channel::socket_type socket(*io);
    socket.assign(boost::asio::local::stream_protocol(), link.ours.release());
    auto ch = channel::create(std::move(socket), channel_options{});
    ch->start([](message) {});

    // The peer is up and answering.
    bool pinged = false;
    ch->request(message_type::ping, json::object(), 10s,
                [&](result<message> r) { pinged = r.ok(); });
    ASSERT_TRUE(testing::run_until(*io, [&] { return pinged; }));

    // Two calls the peer never answers, with deadlines far beyond the bound.
    std::vector<std::string> codes;
    std::chrono::steady_clock::time_point failed_at;
    for (int i = 0; i < 2; ++i) {
      ch->request(message_type::evict, json{{"bytes", 1}}, 60s, [&](result<message> r) {
        codes.push_back(r.ok() ? "ok" : r.err().code);
        failed_at = std::chrono::steady_clock::now();
      });
    }
    testing::run_until(
        *io, [] { return false; }, 50ms);
    ASSERT_TRUE(codes.empty());

    const auto killed_at = std::chrono::steady_clock::now();
    peer.kill(SIGKILL);
    ASSERT_TRUE(testing::run_until(
        *io, [&] { return codes.size() == 2; }, 5s));
    EXPECT_EQ(codes, (std::vector<std::string>{"peer_lost", "peer_lost"}));
    EXPECT_LT(failed_at - killed_at, peer_lost_bound);
    const int status = peer.wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    // Later requests on the dead channel fail at once, never hang.
    std::optional<std::string> late;
    ch->request(message_type::ping, json::object(), 60s,
                [&](result<message> r) { late = r.ok() ? "ok" : r.err().code; });
    ASSERT_TRUE(testing::run_until(
        *io, [&] { return late.has_value(); }, 1s));
    EXPECT_EQ(*late, "peer_lost");
  }
  io.reset();
}

// Spawns a budget peer on a claimed slot, sends it the control segment, and returns its answer.
char start_budget_peer(control_segment& control, std::unique_ptr<peer_process>& peer,
                       std::uint64_t bytes, std::uint32_t pieces, std::uint32_t& slot,
                       const std::string& misbehaviour = "") {
  inherited_pair fd_link;
  // The peer learns its slot from argv; claim_slot takes the first free one, found first here.
  std::uint32_t next = 0;
  while (control.slot(next).pid.load() != 0) ++next;
  std::vector<std::string> args{"budget", std::to_string(fd_link.theirs.get()),
                                std::to_string(next), std::to_string(bytes),
                                std::to_string(pieces)};
  if (!misbehaviour.empty()) args.push_back(misbehaviour);
  peer = std::make_unique<peer_process>(args);
  fd_link.theirs.reset();
  auto id = read_process_identity(peer->pid());
  EXPECT_TRUE(id.ok());
  auto claimed = control.claim_slot(*id);
  EXPECT_TRUE(claimed.ok());
  EXPECT_EQ(*claimed, next);
  slot = *claimed;
  const std::byte tag{1};
  const int fd = control.fd();
  EXPECT_TRUE(send_fds(fd_link.ours.get(), {&tag, 1}, {&fd, 1}).ok());
  char answer = 0;
  EXPECT_EQ(::read(fd_link.ours.get(), &answer, 1), 1);
  return answer;
}

TEST_F(ipc_faults, dead_process_budget_slot_is_reclaimed_to_the_exact_byte) {
  auto control = control_segment::create(std::uint64_t{1} << 30, 8);
  ASSERT_TRUE(control.ok());
  auto host_slot = control->claim_slot(*read_process_identity(::getpid()));
  ASSERT_TRUE(host_slot.ok());
  budget_account host(*control, *host_slot);
  ASSERT_TRUE(host.reserve(1000003).ok());

  std::unique_ptr<peer_process> first, second;
  std::uint32_t first_slot = 0, second_slot = 0;
  ASSERT_EQ(start_budget_peer(*control, first, 123457, 3, first_slot), 'y');
  ASSERT_EQ(start_budget_peer(*control, second, 77777, 1, second_slot), 'y');
  EXPECT_EQ(control->total_reserved(), 1000003u + 123457u + 77777u);
  EXPECT_EQ(control->slot(first_slot).high_water.load(), 123457u);

  first->kill(SIGKILL);
  first->wait();
  const auto reclaimed = control->reclaim_dead();
  EXPECT_EQ(reclaimed, (std::vector<std::uint32_t>{first_slot}));
  EXPECT_EQ(control->total_reserved(), 1000003u + 77777u);
  EXPECT_EQ(control->slot(first_slot).pid.load(), 0u);
  EXPECT_EQ(control->slot(first_slot).reserved.load(), 0u);
  EXPECT_EQ(control->unresolved_bytes(), 0u);

  // The freed slot can be claimed again, from zero.
  std::unique_ptr<peer_process> third;
  std::uint32_t third_slot = 0;
  ASSERT_EQ(start_budget_peer(*control, third, 5, 1, third_slot), 'y');
  EXPECT_EQ(third_slot, first_slot);
  EXPECT_EQ(control->total_reserved(), 1000003u + 77777u + 5u);

  second->kill(SIGKILL);
  third->kill(SIGKILL);
  second->wait();
  third->wait();
  EXPECT_EQ(control->reclaim_dead().size(), 2u);
  EXPECT_EQ(control->total_reserved(), 1000003u);
  host.release(1000003);
  EXPECT_EQ(control->total_reserved(), 0u);
}

TEST_F(ipc_faults, dead_process_claiming_more_than_the_total_does_not_wrap_the_budget) {
  constexpr std::uint64_t budget = std::uint64_t{1} << 30;
  auto control = control_segment::create(budget, 4);
  ASSERT_TRUE(control.ok());
  budget_account host(*control, *control->claim_slot(*read_process_identity(::getpid())));
  ASSERT_TRUE(host.reserve(1000003).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  // The peer holds 5 bytes but writes 2^63 into its slot's `reserved` word, then is killed.
  const std::uint64_t claimed = std::uint64_t{1} << 63;
  ASSERT_EQ(start_budget_peer(*control, peer, 5, 1, slot, "claim=" + std::to_string(claimed)), 'y');
  EXPECT_EQ(control->total_reserved(), 1000003u + 5u);
  peer->kill(SIGKILL);
  peer->wait();
  EXPECT_EQ(control->reclaim_dead(), (std::vector<std::uint32_t>{slot}));
  // Only the 5 bytes beyond the host's own slot went back; the rest is reported, not applied.
  EXPECT_EQ(control->total_reserved(), 1000003u);
  EXPECT_EQ(control->overclaimed_bytes(), claimed - 5);
  // The budget still works: the rest of it can be reserved, and the host's bytes return exactly.
  EXPECT_TRUE(host.reserve(budget - 1000003).ok());
  host.release(budget);
  EXPECT_EQ(control->total_reserved(), 0u);
}

TEST_F(ipc_faults, host_keeps_its_own_geometry_and_budget_when_a_worker_rewrites_the_header) {
  constexpr std::uint64_t budget = 1 << 20;
  auto control = control_segment::create(budget, 4);
  ASSERT_TRUE(control.ok());
  const std::uint64_t size = control->total_size();
  budget_account host(*control, *control->claim_slot(*read_process_identity(::getpid())));
  ASSERT_TRUE(host.reserve(1000).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  // The peer maps the header writable itself (any holder of the fd can) and claims 2^20 slots,
  // a budget of 1 byte and a bogus size.
  ASSERT_EQ(start_budget_peer(*control, peer, 4096, 1, slot, "corrupt_header"), 'y');
  auto page = mapping::map(control->fd(), 0, page_size(), /*writable=*/false);
  ASSERT_TRUE(page.ok());
  const auto& shared = *reinterpret_cast<const control_header*>(page->data());
  ASSERT_EQ(shared.slot_count, 1u << 20);
  ASSERT_EQ(shared.budget_bytes, 1u);

  EXPECT_EQ(control->slot_count(), 4u);
  EXPECT_EQ(control->budget(), budget);
  EXPECT_EQ(control->total_size(), size);
  peer->kill(SIGKILL);
  peer->wait();
  // Reclaim walks the 4 slots it created, not the 2^20 the header now claims.
  EXPECT_EQ(control->reclaim_dead(), (std::vector<std::uint32_t>{slot}));
  EXPECT_EQ(control->total_reserved(), 1000u);
  // Reservations are still judged against the real budget, also by an account made now.
  budget_account late(*control, 0);
  EXPECT_EQ(late.budget(), budget);
  EXPECT_TRUE(host.reserve(budget - 1000).ok());
  EXPECT_FALSE(host.reserve(1).ok());
  host.release(budget);
  EXPECT_EQ(control->total_reserved(), 0u);
  // A worker attaching now is refused: the header no longer fits the fd.
  auto attached = control_segment::attach(unique_fd(::fcntl(control->fd(), F_DUPFD_CLOEXEC, 0)));
  ASSERT_FALSE(attached.ok());
  EXPECT_EQ(attached.err().code, "bad_segment");
}

TEST_F(ipc_faults, reservation_over_the_budget_in_another_process_is_refused_and_rolled_back) {
  auto control = control_segment::create(1 << 20, 4);
  ASSERT_TRUE(control.ok());
  budget_account host(*control, *control->claim_slot(*read_process_identity(::getpid())));
  ASSERT_TRUE(host.reserve(700000).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  // 4 pieces of 100000: three fit (1000000 ≤ 1048576), the fourth does not.
  EXPECT_EQ(start_budget_peer(*control, peer, 400000, 4, slot), 'n');
  EXPECT_EQ(control->slot(slot).reserved.load(), 300000u);
  EXPECT_EQ(control->total_reserved(), 1000000u);
  EXPECT_EQ(control->slot(slot).pending.load(), 0u);
  peer->kill(SIGKILL);
  peer->wait();
  control->reclaim_dead();
  EXPECT_EQ(control->total_reserved(), 700000u);
  host.release(700000);
}

}  // namespace
}  // namespace orch::ipc
