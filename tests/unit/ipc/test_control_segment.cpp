// The control segment: one budget, grants per slot, lock-free reservation within a grant, a
// host-side total no worker word can forge, exact reclaim, and a control memfd no re-open can
// write. Cross-process behaviour (a killed or lying process) is in tests/fault/ipc.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
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

unique_fd dup_fd(int fd) {
  return unique_fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

// An account whose slow path asks the segment directly, as the host's own account does.
void ask_segment(budget_account& account, control_segment& seg, std::uint32_t slot,
                 std::mutex* host_lock = nullptr) {
  account.set_grant_source([&seg, slot, host_lock](std::uint64_t shortfall) -> status {
    std::unique_lock<std::mutex> lock;
    if (host_lock != nullptr) lock = std::unique_lock(*host_lock);
    auto grown = seg.grow_grant(slot, shortfall);
    if (!grown) return grown.err();
    return ok_status();
  });
}

TEST_F(control_segment_test, reservation_stays_within_the_grant_and_failure_changes_nothing) {
  auto seg = control_segment::create(1000, 4);
  ASSERT_TRUE(seg.ok());
  auto slot = seg->claim_slot(self());
  ASSERT_TRUE(slot.ok());
  budget_account account(*seg, *slot);
  // A new slot has no grant: without a source nothing can be reserved.
  EXPECT_EQ(account.grant(), 0u);
  EXPECT_EQ(account.reserve(1).err().code, "budget_exceeded");
  ASSERT_TRUE(seg->grow_grant(*slot, 600).ok());
  ASSERT_TRUE(account.reserve(600).ok());
  auto refused = account.reserve(1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "budget_exceeded");
  EXPECT_EQ(account.reserved(), 600u);
  EXPECT_EQ(seg->total_reserved(), 600u);
  account.release(600);
  EXPECT_EQ(seg->total_reserved(), 0u);
  EXPECT_EQ(account.high_water(), 600u);
  account.release(5);  // more than it holds: stays at 0, never wraps
  EXPECT_EQ(account.reserved(), 0u);
}

TEST_F(control_segment_test, the_slow_path_grows_the_grant_up_to_the_budget_and_no_further) {
  auto seg = control_segment::create(1000, 4);
  ASSERT_TRUE(seg.ok());
  auto slot = seg->claim_slot(self());
  budget_account account(*seg, *slot);
  ask_segment(account, *seg, *slot);
  ASSERT_TRUE(account.reserve(600).ok());
  EXPECT_EQ(account.grant(), 600u);
  auto refused = account.reserve(401);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "budget_exceeded");
  EXPECT_EQ(account.reserved(), 600u);
  EXPECT_EQ(seg->granted_total(), 600u);
  EXPECT_TRUE(account.reserve(400).ok());
  EXPECT_EQ(seg->total_reserved(), 1000u);
  EXPECT_EQ(seg->granted_total(), 1000u);
}

TEST_F(control_segment_test, huge_request_does_not_wrap_around) {
  auto seg = control_segment::create(1000, 1);
  ASSERT_TRUE(seg.ok());
  auto slot = seg->claim_slot(self());
  budget_account account(*seg, *slot);
  ask_segment(account, *seg, *slot);
  ASSERT_TRUE(account.reserve(10).ok());
  EXPECT_FALSE(account.reserve(~std::uint64_t{0} - 5).ok());
  EXPECT_FALSE(seg->grow_grant(*slot, ~std::uint64_t{0}).ok());
  EXPECT_EQ(seg->total_reserved(), 10u);
  EXPECT_LE(seg->granted_total(), 1000u);
}

TEST_F(control_segment_test, grants_never_sum_past_the_budget_and_unused_grant_is_taken_back) {
  auto seg = control_segment::create(1000, 3);
  ASSERT_TRUE(seg.ok());
  const auto a = *seg->claim_slot(process_identity{1001, 1});
  const auto b = *seg->claim_slot(process_identity{1002, 1});
  budget_account account_a(*seg, a);
  ASSERT_EQ(*seg->grow_grant(a, 700), 700u);
  ASSERT_TRUE(account_a.reserve(300).ok());
  // b needs 600: 300 is free, and the 400 that a holds without using are taken back.
  ASSERT_EQ(*seg->grow_grant(b, 600), 600u);
  EXPECT_EQ(seg->grant(a), 300u);
  EXPECT_EQ(seg->granted_total(), 900u);
  // What a has reserved is never taken: nothing more fits.
  auto refused = seg->grow_grant(b, 101);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "budget_exceeded");
  EXPECT_EQ(seg->grant(a), 300u);
  EXPECT_EQ(account_a.reserved(), 300u);
  // Slack is given only from what is free.
  ASSERT_EQ(*seg->grow_grant(b, 50, 1000), 700u);
  EXPECT_EQ(seg->granted_total(), 1000u);
}

TEST_F(control_segment_test, a_grant_limit_refuses_growth_and_hears_every_shrink) {
  auto seg = control_segment::create(1000, 2);
  ASSERT_TRUE(seg.ok());
  const auto a = *seg->claim_slot(process_identity{1001, 1});
  std::vector<std::uint64_t> asked;
  seg->set_grant_limit([&](std::uint64_t total) -> status {
    asked.push_back(total);
    if (total > 400) return error{"machine_budget_exceeded", "another host holds the rest"};
    return ok_status();
  });
  ASSERT_TRUE(seg->grow_grant(a, 300).ok());
  auto refused = seg->grow_grant(a, 200);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "machine_budget_exceeded");
  EXPECT_EQ(seg->grant(a), 300u);
  EXPECT_EQ(seg->reclaim_slot(a), 0u);
  EXPECT_EQ(asked.back(), 0u);  // the limit heard the grant go
}

TEST_F(control_segment_test, contending_reservations_and_revocations_never_exceed_a_grant) {
  constexpr std::uint64_t budget = 64 * 1024;
  auto seg = control_segment::create(budget, 4);
  ASSERT_TRUE(seg.ok());
  std::mutex host_lock;  // grow_grant and revoke_unused are the host's, one at a time
  std::atomic<bool> over{false}, stop{false};
  std::vector<std::uint32_t> slots;
  for (unsigned t = 0; t < 4; ++t)
    slots.push_back(*seg->claim_slot(process_identity{1000u + t, 1}));
  std::vector<std::thread> threads;
  for (const auto slot : slots) {
    threads.emplace_back([&, slot] {
      budget_account account(*seg, slot);
      ask_segment(account, *seg, slot, &host_lock);
      for (int i = 0; i < 20000; ++i) {
        if (account.reserve(4096).ok()) account.release(4096);
      }
    });
  }
  // The host takes unused grant back all the while, and checks its own totals.
  std::thread host([&] {
    while (!stop.load()) {
      std::lock_guard lock(host_lock);
      for (const auto slot : slots) seg->revoke_unused(slot);
      if (seg->granted_total() > budget || seg->total_reserved() > budget) over = true;
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  host.join();
  EXPECT_FALSE(over.load());
  EXPECT_EQ(seg->total_reserved(), 0u);
  for (const auto slot : slots) {
    EXPECT_FALSE(seg->flagged(slot)) << "an honest slot was flagged";
    EXPECT_LE(seg->claimed_reserved(slot), seg->grant(slot));
  }
}

TEST_F(control_segment_test, reclaiming_a_slot_returns_exactly_its_bytes_and_its_grant) {
  auto seg = control_segment::create(1 << 20, 2);
  ASSERT_TRUE(seg.ok());
  const auto host_slot = *seg->claim_slot(self());
  budget_account host(*seg, host_slot);
  ask_segment(host, *seg, host_slot);
  ASSERT_TRUE(host.reserve(1000).ok());
  auto other = seg->claim_slot(process_identity{999999, 1});
  ASSERT_TRUE(other.ok());
  budget_account worker(*seg, *other);
  ask_segment(worker, *seg, *other);
  ASSERT_TRUE(worker.reserve(12345).ok());
  EXPECT_EQ(seg->reclaim_slot(*other), 12345u);
  EXPECT_EQ(seg->total_reserved(), 1000u);
  EXPECT_EQ(seg->granted_total(), 1000u);
  EXPECT_EQ(seg->record(*other).pid.load(), 0u);
  EXPECT_EQ(seg->slot_fd(*other), -1);
  EXPECT_EQ(seg->overclaimed_bytes(), 0u);
}

TEST_F(control_segment_test, a_slot_claiming_more_than_its_grant_is_clamped_and_flagged) {
  auto seg = control_segment::create(1 << 20, 3);
  ASSERT_TRUE(seg.ok());
  const auto host_slot = *seg->claim_slot(self());
  budget_account host(*seg, host_slot);
  ask_segment(host, *seg, host_slot);
  ASSERT_TRUE(host.reserve(1000).ok());
  const auto liar = *seg->claim_slot(process_identity{999999, 1});
  budget_account worker(*seg, liar);
  ask_segment(worker, *seg, liar);
  ASSERT_TRUE(worker.reserve(5).ok());
  // The worker's own word, which it can set to anything.
  seg->counters(liar).reserved.store(~std::uint64_t{0});
  EXPECT_EQ(seg->counted_reserved(liar), 5u);
  EXPECT_TRUE(seg->flagged(liar));
  EXPECT_EQ(seg->total_reserved(), 1005u);
  // Being flagged costs the liar its grant: it gets no more, and what it holds can be taken.
  EXPECT_FALSE(seg->grow_grant(liar, 1).ok());
  // Another process still gets everything the liar was not granted.
  const auto honest = *seg->claim_slot(process_identity{999998, 1});
  budget_account other(*seg, honest);
  ask_segment(other, *seg, honest);
  EXPECT_TRUE(other.reserve((1 << 20) - 1005).ok());
  EXPECT_FALSE(seg->flagged(honest));
  EXPECT_EQ(seg->reclaim_slot(liar), 5u);
  EXPECT_EQ(seg->overclaimed_bytes(), ~std::uint64_t{0} - 5);
  EXPECT_FALSE(seg->flagged(liar));  // a fresh owner starts clean
  EXPECT_EQ(seg->total_reserved(), 1000u + (1 << 20) - 1005);
}

TEST_F(control_segment_test, a_worker_maps_the_control_memfd_read_only_and_only_its_own_slot) {
  auto host = control_segment::create(1000, 4);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(host->claim_slot(process_identity{999999, 1}).ok());
  const auto mine = *host->claim_slot(self());
  // Dups stand in for the SCM_RIGHTS copies (tests/fault/ipc does it across processes).
  auto worker = control_segment::attach(dup_fd(host->fd()), dup_fd(host->slot_fd(mine)), mine);
  ASSERT_TRUE(worker.ok()) << worker.err().message;
  EXPECT_TRUE(host->header_writable());
  EXPECT_FALSE(worker->header_writable());
  EXPECT_EQ(worker->slot_count(), 4u);
  EXPECT_EQ(worker->budget(), 1000u);
  EXPECT_EQ(worker->total_size(), host->total_size());
  EXPECT_EQ(worker->slot_fd(0), -1) << "a worker maps no slot but its own";
  EXPECT_EQ(worker->slot_fd(mine), -1) << "nor keeps its own slot's fd, which a sibling could open";
  ASSERT_TRUE(host->grow_grant(mine, 100).ok());
  budget_account account(*worker, mine);
  EXPECT_EQ(account.grant(), 100u);  // the host's grant, read through the read-only mapping
  ASSERT_TRUE(account.reserve(60).ok());
  EXPECT_EQ(host->claimed_reserved(mine), 60u);
  worker->block(mine).beat();
  EXPECT_EQ(host->block(mine).heartbeat.load(), 1u);
  // Slot 0 belongs to another pid: attaching as its owner is refused.
  auto other = control_segment::attach(dup_fd(host->fd()), dup_fd(host->slot_fd(0)), 0);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, "bad_slot");
}

TEST_F(control_segment_test, the_host_keeps_its_own_copy_of_the_header) {
  auto host = control_segment::create(1000, 4);
  ASSERT_TRUE(host.ok());
  const auto mine = *host->claim_slot(self());
  auto worker = control_segment::attach(dup_fd(host->fd()), dup_fd(host->slot_fd(mine)), mine);
  ASSERT_TRUE(worker.ok());
  // Whoever rewrites the shared header afterwards (only the host's own mapping can) changes
  // neither side's view of the segment.
  auto* shared =
      reinterpret_cast<control_header*>(const_cast<std::byte*>(host->header_page().data()));
  shared->slot_count = 1u << 20;
  shared->budget_bytes = 1;
  EXPECT_EQ(host->slot_count(), 4u);
  EXPECT_EQ(host->budget(), 1000u);
  EXPECT_EQ(worker->slot_count(), 4u);
  EXPECT_EQ(budget_account(*worker, mine).budget(), 1000u);
  EXPECT_TRUE(host->reclaim_dead().empty());
  auto late = control_segment::attach(dup_fd(host->fd()), dup_fd(host->slot_fd(mine)), mine);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.err().code, "bad_segment");
}

TEST_F(control_segment_test, no_reopen_of_the_control_memfd_can_write_it) {
  auto seg = control_segment::create(1000, 2);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(seg->sealed_against_writers()) << "kernel without F_SEAL_FUTURE_WRITE?";
  const auto before = std::vector<std::byte>(seg->header_page().begin(), seg->header_page().end());
  // What the hostile budget pack did: re-open the fd read-write through /proc.
  const std::string path = "/proc/self/fd/" + std::to_string(seg->fd());
  unique_fd reopened(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid());
  void* writable =
      ::mmap(nullptr, seg->total_size(), PROT_READ | PROT_WRITE, MAP_SHARED, reopened.get(), 0);
  EXPECT_EQ(writable, MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  if (writable != MAP_FAILED) ::munmap(writable, seg->total_size());
  const std::vector<char> junk(4096, '\xff');
  EXPECT_LT(::pwrite(reopened.get(), junk.data(), junk.size(), 0), 0);
  EXPECT_LT(::pwrite(seg->fd(), junk.data(), junk.size(), 4096), 0);
  void* readable = ::mmap(nullptr, seg->total_size(), PROT_READ, MAP_SHARED, reopened.get(), 0);
  ASSERT_NE(readable, MAP_FAILED);
  EXPECT_NE(::mprotect(readable, seg->total_size(), PROT_READ | PROT_WRITE), 0);
  EXPECT_NE(::fallocate(reopened.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  ::munmap(readable, seg->total_size());
  EXPECT_EQ(std::memcmp(before.data(), seg->header_page().data(), before.size()), 0);
  // The host's own mappings, made before the seal, still write.
  const auto slot = *seg->claim_slot(process_identity{1234, 5});
  EXPECT_EQ(seg->record(slot).pid.load(), 1234u);
  EXPECT_TRUE(seg->grow_grant(slot, 10).ok());
}

TEST_F(control_segment_test, each_owner_gets_a_fresh_slot_memfd) {
  auto seg = control_segment::create(1000, 1);
  ASSERT_TRUE(seg.ok());
  const auto slot = *seg->claim_slot(process_identity{1001, 1});
  unique_fd old_owner = dup_fd(seg->slot_fd(slot));
  seg->reclaim_slot(slot);
  ASSERT_EQ(*seg->claim_slot(process_identity{1002, 1}), slot);
  // The earlier owner still holds its fd and writes through it: nobody reads that file now.
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, old_owner.get(), 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 0xff, 4096);
  ::munmap(map, 4096);
  EXPECT_EQ(seg->claimed_reserved(slot), 0u);
  EXPECT_FALSE(seg->flagged(slot));
  EXPECT_TRUE(seg->block(slot).read().ok());
}

TEST_F(control_segment_test, reclaim_dead_skips_live_processes) {
  auto seg = control_segment::create(1 << 20, 2);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(seg->claim_slot(self()).ok());
  EXPECT_TRUE(seg->reclaim_dead().empty());
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
