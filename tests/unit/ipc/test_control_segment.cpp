// The control segment: one budget, per-process slots, lock-free reservation, exact reclaim.
// Cross-process behaviour (a killed process's slot) is in tests/fault/ipc.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "leak_check.hpp"
#include "orch/ipc/control_segment.hpp"

namespace orch::ipc {
namespace {

using control_segment_test = testing::leak_checked_test;

process_identity self() {
  return *read_process_identity(::getpid());
}

TEST_F(control_segment_test, reservation_never_passes_the_budget_and_failure_changes_nothing) {
  auto seg = control_segment::create(1000, 4);
  ASSERT_TRUE(seg.ok());
  auto slot = seg->claim_slot(self());
  ASSERT_TRUE(slot.ok());
  budget_account account(*seg, *slot);
  ASSERT_TRUE(account.reserve(600).ok());
  auto refused = account.reserve(401);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "budget_exceeded");
  EXPECT_EQ(seg->total_reserved(), 600u);
  EXPECT_EQ(account.reserved(), 600u);
  EXPECT_EQ(seg->slot(*slot).pending.load(), 0u);
  EXPECT_TRUE(account.reserve(400).ok());
  EXPECT_EQ(seg->total_reserved(), 1000u);
  account.release(1000);
  EXPECT_EQ(seg->total_reserved(), 0u);
  EXPECT_EQ(account.high_water(), 1000u);
}

TEST_F(control_segment_test, huge_request_does_not_wrap_around) {
  auto seg = control_segment::create(1000, 1);
  ASSERT_TRUE(seg.ok());
  budget_account account(*seg, *seg->claim_slot(self()));
  ASSERT_TRUE(account.reserve(10).ok());
  EXPECT_FALSE(account.reserve(~std::uint64_t{0} - 5).ok());
  EXPECT_EQ(seg->total_reserved(), 10u);
}

TEST_F(control_segment_test, contending_threads_never_exceed_the_budget) {
  constexpr std::uint64_t budget = 64 * 1024;
  auto seg = control_segment::create(budget, 4);
  ASSERT_TRUE(seg.ok());
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    auto slot = seg->claim_slot(process_identity{1000u + static_cast<unsigned>(t), 1});
    ASSERT_TRUE(slot.ok());
    threads.emplace_back([&, slot = *slot] {
      budget_account account(*seg, slot);
      for (int i = 0; i < 20000; ++i) {
        if (account.reserve(4096).ok()) {
          if (seg->total_reserved() > budget) over = true;
          account.release(4096);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(over.load());
  EXPECT_EQ(seg->total_reserved(), 0u);
}

TEST_F(control_segment_test, reclaiming_a_slot_returns_exactly_its_bytes) {
  auto seg = control_segment::create(1 << 20, 2);
  ASSERT_TRUE(seg.ok());
  budget_account host(*seg, *seg->claim_slot(self()));
  ASSERT_TRUE(host.reserve(1000).ok());
  auto other = seg->claim_slot(process_identity{999999, 1});
  ASSERT_TRUE(other.ok());
  budget_account worker(*seg, *other);
  ASSERT_TRUE(worker.reserve(12345).ok());
  EXPECT_EQ(seg->reclaim_slot(*other), 12345u);
  EXPECT_EQ(seg->total_reserved(), 1000u);
  EXPECT_EQ(seg->slot(*other).pid.load(), 0u);
  EXPECT_EQ(seg->unresolved_bytes(), 0u);
}

TEST_F(control_segment_test, reclaiming_a_slot_that_overclaims_returns_only_its_share) {
  auto seg = control_segment::create(1 << 20, 2);
  ASSERT_TRUE(seg.ok());
  budget_account host(*seg, *seg->claim_slot(self()));
  ASSERT_TRUE(host.reserve(1000).ok());
  auto other = seg->claim_slot(process_identity{999999, 1});
  ASSERT_TRUE(other.ok());
  budget_account worker(*seg, *other);
  ASSERT_TRUE(worker.reserve(5).ok());
  // The worker's own word, which it (or a bug in it) can set to anything.
  seg->slot(*other).reserved.store(std::uint64_t{1} << 63);
  EXPECT_EQ(seg->reclaim_slot(*other), 5u);
  EXPECT_EQ(seg->total_reserved(), 1000u);
  EXPECT_EQ(seg->overclaimed_bytes(), (std::uint64_t{1} << 63) - 5);
  EXPECT_EQ(seg->unresolved_bytes(), 0u);
  // The rest of the budget is still usable, and the host's bytes return exactly.
  EXPECT_TRUE(host.reserve((1 << 20) - 1000).ok());
  host.release(1 << 20);
  EXPECT_EQ(seg->total_reserved(), 0u);
}

TEST_F(control_segment_test, reclaim_dead_skips_live_processes) {
  auto seg = control_segment::create(1 << 20, 2);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(seg->claim_slot(self()).ok());
  EXPECT_TRUE(seg->reclaim_dead().empty());
}

TEST_F(control_segment_test, worker_maps_the_header_read_only_and_keeps_its_own_copy) {
  auto host = control_segment::create(1000, 4);
  ASSERT_TRUE(host.ok());
  // A dup stands in for the SCM_RIGHTS copy (tests/fault/ipc does it across processes).
  auto worker = control_segment::attach(unique_fd(::fcntl(host->fd(), F_DUPFD_CLOEXEC, 0)));
  ASSERT_TRUE(worker.ok()) << worker.err().message;
  EXPECT_TRUE(host->header_writable());
  EXPECT_FALSE(worker->header_writable());
  EXPECT_EQ(worker->slot_count(), 4u);
  EXPECT_EQ(worker->budget(), 1000u);
  EXPECT_EQ(worker->total_size(), host->total_size());

  // Whoever rewrites the shared header afterwards changes neither side's view of the segment.
  auto* shared =
      reinterpret_cast<control_header*>(const_cast<std::byte*>(host->header_page().data()));
  shared->slot_count = 1u << 20;
  shared->budget_bytes = 1;
  EXPECT_EQ(host->slot_count(), 4u);
  EXPECT_EQ(host->budget(), 1000u);
  EXPECT_EQ(worker->slot_count(), 4u);
  EXPECT_EQ(budget_account(*worker, 0).budget(), 1000u);
  EXPECT_TRUE(host->reclaim_dead().empty());
  // A header that no longer fits the fd's real size is refused on attach.
  auto late = control_segment::attach(unique_fd(::fcntl(host->fd(), F_DUPFD_CLOEXEC, 0)));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.err().code, "bad_segment");
}

TEST_F(control_segment_test, slots_run_out_with_a_typed_error) {
  auto seg = control_segment::create(1, 1);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(seg->claim_slot(self()).ok());
  auto none = seg->claim_slot(self());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.err().code, "no_free_slot");
}

TEST_F(control_segment_test, stat_line_with_parentheses_in_the_name_parses) {
  auto f = parse_proc_stat(
      "42 (a) b)) S 1 42 42 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, 'S');
  EXPECT_EQ(f->start_time, 987654u);
  EXPECT_FALSE(parse_proc_stat("42 (x) S 1 2").ok());
}

TEST_F(control_segment_test, this_process_is_alive_and_a_changed_start_time_is_not) {
  auto id = read_process_identity(::getpid());
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(is_alive(*id));
  EXPECT_FALSE(is_alive(process_identity{id->pid, id->start_time + 1}));
}

}  // namespace
}  // namespace orch::ipc
