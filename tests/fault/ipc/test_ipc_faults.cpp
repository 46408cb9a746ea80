// orch::ipc when a peer is SIGKILLed or hostile: pending requests fail promptly with peer_lost,
// the host reclaims a dead process's budget slot to the exact byte, a lying slot is clamped to
// its grant, and no fd a worker holds can write the control segment. No /dev/shm entry and no fd
// may survive any test (leak_checked_test).
#include <gtest/gtest.h>

#include <fcntl.h>

#include <algorithm>
#include <memory>
#include <optional>

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

// The bound of docs/protocol.md: a pending request fails within 1 s of the peer's SIGKILL.
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

// The host's own account: its slow path asks the segment directly (host_memory does the same).
std::unique_ptr<budget_account> host_account(control_segment& control) {
  auto slot = control.claim_slot(*read_process_identity(::getpid()));
  EXPECT_TRUE(slot.ok());
  auto account = std::make_unique<budget_account>(control, *slot);
  account->set_grant_source([&control, s = *slot](std::uint64_t shortfall) -> status {
    auto grown = control.grow_grant(s, shortfall);
    if (!grown) return grown.err();
    return ok_status();
  });
  return account;
}

// Spawns a budget peer on a claimed slot with a grant of `grant` bytes (all that is free when
// omitted), sends it the control segment and its slot, and returns its answer.
char start_budget_peer(control_segment& control, std::unique_ptr<peer_process>& peer,
                       std::uint64_t bytes, std::uint32_t pieces, std::uint32_t& slot,
                       const std::string& misbehaviour = "",
                       std::optional<std::uint64_t> grant = std::nullopt) {
  inherited_pair fd_link;
  // The peer learns its slot from argv; claim_slot takes the first free one, found first here.
  std::uint32_t next = 0;
  while (control.record(next).pid.load() != 0) ++next;
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
  const std::uint64_t free_now = control.budget() - control.granted_total();
  EXPECT_TRUE(control.grow_grant(slot, grant.value_or(free_now)).ok());
  const std::byte tag{1};
  const int fds[2] = {control.fd(), control.slot_fd(slot)};
  EXPECT_TRUE(send_fds(fd_link.ours.get(), {&tag, 1}, fds).ok());
  char answer = 0;
  EXPECT_EQ(::read(fd_link.ours.get(), &answer, 1), 1);
  return answer;
}

// Every byte of the control memfd, read through a fresh read-only mapping.
std::vector<std::byte> control_bytes(const control_segment& control) {
  auto all = mapping::map(control.fd(), 0, control.total_size(), /*writable=*/false);
  EXPECT_TRUE(all.ok());
  return {all->bytes().begin(), all->bytes().end()};
}

TEST_F(ipc_faults, dead_process_budget_slot_is_reclaimed_to_the_exact_byte) {
  auto control = control_segment::create(std::uint64_t{1} << 30, 8);
  ASSERT_TRUE(control.ok());
  auto host = host_account(*control);
  ASSERT_TRUE(host->reserve(1000003).ok());

  std::unique_ptr<peer_process> first, second;
  std::uint32_t first_slot = 0, second_slot = 0;
  ASSERT_EQ(start_budget_peer(*control, first, 123457, 3, first_slot, "", 123457), 'y');
  ASSERT_EQ(start_budget_peer(*control, second, 77777, 1, second_slot, "", 77777), 'y');
  EXPECT_EQ(control->total_reserved(), 1000003u + 123457u + 77777u);
  EXPECT_EQ(control->counters(first_slot).high_water.load(), 123457u);

  first->kill(SIGKILL);
  first->wait();
  const auto reclaimed = control->reclaim_dead();
  EXPECT_EQ(reclaimed, (std::vector<std::uint32_t>{first_slot}));
  EXPECT_EQ(control->total_reserved(), 1000003u + 77777u);
  EXPECT_EQ(control->granted_total(), 1000003u + 77777u);
  EXPECT_EQ(control->record(first_slot).pid.load(), 0u);
  EXPECT_EQ(control->claimed_reserved(first_slot), 0u);
  EXPECT_EQ(control->overclaimed_bytes(), 0u);

  // The freed slot can be claimed again, from zero.
  std::unique_ptr<peer_process> third;
  std::uint32_t third_slot = 0;
  ASSERT_EQ(start_budget_peer(*control, third, 5, 1, third_slot, "", 5), 'y');
  EXPECT_EQ(third_slot, first_slot);
  EXPECT_EQ(control->total_reserved(), 1000003u + 77777u + 5u);

  second->kill(SIGKILL);
  third->kill(SIGKILL);
  second->wait();
  third->wait();
  EXPECT_EQ(control->reclaim_dead().size(), 2u);
  EXPECT_EQ(control->total_reserved(), 1000003u);
  host->release(1000003);
  EXPECT_EQ(control->total_reserved(), 0u);
}

TEST_F(ipc_faults, a_process_claiming_more_than_its_grant_is_clamped_flagged_and_harms_nobody) {
  constexpr std::uint64_t budget = std::uint64_t{1} << 30;
  auto control = control_segment::create(budget, 4);
  ASSERT_TRUE(control.ok());
  auto host = host_account(*control);
  ASSERT_TRUE(host->reserve(1000003).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  // The peer holds 5 bytes of a grant of 5 but writes 2^63 into its slot's `reserved` word.
  const std::uint64_t claimed = std::uint64_t{1} << 63;
  ASSERT_EQ(start_budget_peer(*control, peer, 5, 1, slot, "claim=" + std::to_string(claimed), 5),
            'y');
  EXPECT_EQ(control->claimed_reserved(slot), claimed);
  EXPECT_EQ(control->total_reserved(), 1000003u + 5u);  // counted as its grant
  EXPECT_TRUE(control->flagged(slot));
  // Live, the liar takes nothing from the others: the rest of the budget is still there.
  ASSERT_TRUE(host->reserve(budget - 1000003 - 5).ok());
  host->release(budget - 1000003 - 5);
  peer->kill(SIGKILL);
  peer->wait();
  EXPECT_EQ(control->reclaim_dead(), (std::vector<std::uint32_t>{slot}));
  EXPECT_EQ(control->total_reserved(), 1000003u);
  EXPECT_EQ(control->overclaimed_bytes(), claimed - 5);
  EXPECT_TRUE(host->reserve(budget - 1000003).ok());
  host->release(budget);
  EXPECT_EQ(control->total_reserved(), 0u);
}

TEST_F(ipc_faults, no_fd_a_worker_holds_can_write_the_control_segment) {
  constexpr std::uint64_t budget = 1 << 20;
  auto control = control_segment::create(budget, 4);
  ASSERT_TRUE(control.ok());
  const std::uint64_t size = control->total_size();
  auto host = host_account(*control);
  ASSERT_TRUE(host->reserve(1000).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  const auto before = control_bytes(*control);
  // The peer tries a writable mmap of its fd and of a /proc/self/fd re-open, pwrite, a punched
  // hole and mprotect: 'y' means every one was refused.
  ASSERT_EQ(start_budget_peer(*control, peer, 4096, 1, slot, "corrupt_header", 4096), 'y');
  // Only what the host itself wrote changed: the peer's record (its claim and grant).
  auto expected = before;
  const std::uint64_t record_at = page_size() + std::uint64_t{slot} * sizeof(slot_record);
  const auto now = control_bytes(*control);
  std::copy(now.begin() + record_at, now.begin() + record_at + sizeof(slot_record),
            expected.begin() + record_at);
  EXPECT_EQ(now, expected) << "a worker changed the control memfd";
  EXPECT_EQ(control->record(slot).pid.load(), static_cast<std::uint64_t>(peer->pid()));
  EXPECT_EQ(control->grant(slot), 4096u);
  EXPECT_EQ(control->slot_count(), 4u);
  EXPECT_EQ(control->budget(), budget);
  EXPECT_EQ(control->total_size(), size);
  EXPECT_EQ(control->total_reserved(), 1000u + 4096u);
  peer->kill(SIGKILL);
  peer->wait();
  EXPECT_EQ(control->reclaim_dead(), (std::vector<std::uint32_t>{slot}));
  EXPECT_EQ(control->total_reserved(), 1000u);
  EXPECT_TRUE(host->reserve(budget - 1000).ok());
  EXPECT_FALSE(host->reserve(1).ok());
  host->release(budget);
  EXPECT_EQ(control->total_reserved(), 0u);
}

TEST_F(ipc_faults, reservation_over_the_grant_in_another_process_is_refused_and_rolled_back) {
  auto control = control_segment::create(1 << 20, 4);
  ASSERT_TRUE(control.ok());
  auto host = host_account(*control);
  ASSERT_TRUE(host->reserve(700000).ok());
  std::unique_ptr<peer_process> peer;
  std::uint32_t slot = 0;
  // Granted the rest of the budget: 4 pieces of 100000, three fit (1000000 <= 1048576).
  EXPECT_EQ(start_budget_peer(*control, peer, 400000, 4, slot), 'n');
  EXPECT_EQ(control->claimed_reserved(slot), 300000u);
  EXPECT_EQ(control->total_reserved(), 1000000u);
  EXPECT_FALSE(control->flagged(slot));
  peer->kill(SIGKILL);
  peer->wait();
  control->reclaim_dead();
  EXPECT_EQ(control->total_reserved(), 700000u);
  host->release(700000);
}

}  // namespace
}  // namespace orch::ipc
