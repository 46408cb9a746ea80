// The pinned pool: host-only allocation metadata, generations, registration once per mapping,
// and the pool's own segments counted against the budget.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "leak_check.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/pinned_pool.hpp"
#include "orch/ipc/segment_table.hpp"

namespace orch::ipc {
namespace {

using pinned_pool_test = testing::leak_checked_test;

pool_options small() {
  pool_options o;
  o.segment_data_size = 1 << 20;
  o.granule = 4096;
  o.max_segments = 2;
  return o;
}

TEST_F(pinned_pool_test, blocks_are_granule_aligned_and_do_not_overlap) {
  noop_pin_registrar registrar;
  pinned_pool pool(small(), registrar);
  auto a = pool.allocate(100);
  auto b = pool.allocate(5000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offset % 4096, 0u);
  EXPECT_EQ(b->offset % 4096, 0u);
  EXPECT_GE(b->offset, a->offset + 4096);
  EXPECT_NE(a->generation, b->generation);
  EXPECT_EQ(pool.bytes_in_use(), 4096u + 8192u);
}

TEST_F(pinned_pool_test, freed_block_descriptor_goes_stale_and_space_is_reused) {
  noop_pin_registrar registrar;
  pinned_pool pool(small(), registrar);
  auto a = pool.allocate(4096);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool.deallocate(*a).ok());
  auto st = pool.validate(*a);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.err().code, "stale_generation");
  auto again = pool.allocate(4096);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->offset, a->offset);
  EXPECT_NE(again->generation, a->generation);
  EXPECT_EQ(pool.deallocate(*a).err().code, "stale_generation");  // double free is refused
}

TEST_F(pinned_pool_test, pool_grows_by_segments_up_to_its_limit) {
  noop_pin_registrar registrar;
  pinned_pool pool(small(), registrar);
  ASSERT_TRUE(pool.allocate(1 << 20).ok());
  ASSERT_TRUE(pool.allocate(1 << 20).ok());
  EXPECT_EQ(pool.segment_count(), 2u);
  auto third = pool.allocate(1);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.err().code, "pool_exhausted");
  EXPECT_EQ(pool.allocate((1 << 20) + 1).err().code, "too_large");
}

TEST_F(pinned_pool_test, each_mapping_is_registered_once_and_unregistered_before_unmap) {
  counting_pin_registrar registrar;
  {
    pinned_pool pool(small(), registrar);
    ASSERT_TRUE(pool.allocate(10).ok());
    ASSERT_TRUE(pool.allocate(10).ok());
    EXPECT_EQ(registrar.registrations(), 1u);
    EXPECT_EQ(registrar.registered_bytes(), 1u << 20);
  }
  EXPECT_EQ(registrar.unregistrations(), 1u);
  EXPECT_EQ(registrar.registered_bytes(), 0u);
  EXPECT_EQ(registrar.misuses(), 0u);
}

TEST_F(pinned_pool_test, receiver_sees_host_writes_and_metadata_is_read_only_there) {
  noop_pin_registrar host_registrar;
  counting_pin_registrar worker_registrar;
  pinned_pool pool(small(), host_registrar);
  auto d = pool.allocate(64);
  ASSERT_TRUE(d.ok());
  std::memset(pool.bytes(*d)->data(), 0x5a, 64);
  segment_table table(worker_registrar);
  // A dup stands in for the SCM_RIGHTS copy (tests/integration/ipc does it across processes).
  auto id = table.attach(unique_fd(::fcntl(pool.segment(0).fd(), F_DUPFD_CLOEXEC, 0)),
                         pool.segment(0).id(), pool.segment(0).total_size());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, d->segment);
  auto bytes = table.bytes(*d);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)[63], std::byte{0x5a});
  EXPECT_EQ(worker_registrar.registrations(), 1u);
  auto dup = table.attach(unique_fd(::fcntl(pool.segment(0).fd(), F_DUPFD_CLOEXEC, 0)),
                          pool.segment(0).id(), pool.segment(0).total_size());
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.err().code, "duplicate_segment");
  EXPECT_EQ(worker_registrar.registered_bytes(), 1u << 20);
  ASSERT_TRUE(pool.deallocate(*d).ok());
  EXPECT_EQ(table.validate(*d).err().code, "stale_generation");
  EXPECT_EQ(table.validate({99, 1, 0, 1}).err().code, "unknown_segment");
}

// A dup of `fd` standing in for the SCM_RIGHTS copy a worker receives.
unique_fd received_copy(int fd) {
  return unique_fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

TEST_F(pinned_pool_test, received_fd_smaller_than_announced_is_refused_and_closed) {
  noop_pin_registrar host_registrar;
  counting_pin_registrar worker_registrar;
  pinned_pool pool(small(), host_registrar);
  ASSERT_TRUE(pool.allocate(64).ok());
  const pool_segment& segment = pool.segment(0);
  segment_table table(worker_registrar);
  unique_fd fd = received_copy(segment.fd());
  const int raw = fd.get();
  auto id = table.attach(std::move(fd), segment.id(), segment.total_size() + page_size());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.err().code, "size_mismatch");
  EXPECT_FALSE(is_open(raw));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(worker_registrar.registrations(), 0u);
}

TEST_F(pinned_pool_test, received_fd_of_another_size_than_announced_is_refused_and_closed) {
  // The fd of a 2 MiB segment arrives where the host announced a 1 MiB one.
  noop_pin_registrar host_registrar;
  counting_pin_registrar worker_registrar;
  pinned_pool announced(small(), host_registrar);
  pool_options bigger = small();
  bigger.segment_data_size = 2 << 20;
  pinned_pool other(bigger, host_registrar);
  ASSERT_TRUE(announced.allocate(64).ok() && other.allocate(64).ok());
  segment_table table(worker_registrar);
  unique_fd fd = received_copy(other.segment(0).fd());
  const int raw = fd.get();
  auto id =
      table.attach(std::move(fd), announced.segment(0).id(), announced.segment(0).total_size());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.err().code, "size_mismatch");
  EXPECT_FALSE(is_open(raw));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(worker_registrar.registrations(), 0u);
}

TEST_F(pinned_pool_test, announced_size_of_zero_is_refused_and_the_fd_closed) {
  noop_pin_registrar host_registrar;
  counting_pin_registrar worker_registrar;
  pinned_pool pool(small(), host_registrar);
  ASSERT_TRUE(pool.allocate(64).ok());
  segment_table table(worker_registrar);
  unique_fd fd = received_copy(pool.segment(0).fd());
  const int raw = fd.get();
  auto id = table.attach(std::move(fd), pool.segment(0).id(), 0);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.err().code, "size_mismatch");
  EXPECT_FALSE(is_open(raw));
  EXPECT_EQ(table.size(), 0u);
}

TEST_F(pinned_pool_test, received_fd_holding_another_segment_id_is_refused_and_undone) {
  noop_pin_registrar host_registrar;
  counting_pin_registrar worker_registrar;
  pinned_pool pool(small(), host_registrar);
  ASSERT_TRUE(pool.allocate(64).ok());
  segment_table table(worker_registrar);
  unique_fd fd = received_copy(pool.segment(0).fd());
  const int raw = fd.get();
  auto id = table.attach(std::move(fd), pool.segment(0).id() + 1, pool.segment(0).total_size());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.err().code, "segment_mismatch");
  EXPECT_FALSE(is_open(raw));
  EXPECT_EQ(table.size(), 0u);
  // The mapping made to read the header was unregistered before it was unmapped.
  EXPECT_EQ(worker_registrar.registrations(), worker_registrar.unregistrations());
  EXPECT_EQ(worker_registrar.misuses(), 0u);
}

TEST_F(pinned_pool_test, pool_segments_count_against_the_budget) {
  auto control = control_segment::create(3 << 20, 2);
  ASSERT_TRUE(control.ok());
  const auto slot = *control->claim_slot(*read_process_identity(::getpid()));
  budget_account account(*control, slot);
  // The host's account: its slow path grows its grant, as host_memory sets it up.
  account.set_grant_source([&](std::uint64_t shortfall) -> status {
    auto grown = control->grow_grant(slot, shortfall);
    if (!grown) return grown.err();
    return ok_status();
  });
  {
    noop_pin_registrar registrar;
    pool_options o = small();
    o.max_segments = 4;
    pinned_pool pool(o, registrar, &account);
    ASSERT_TRUE(pool.allocate(1 << 20).ok());
    EXPECT_GE(account.reserved(), 1u << 20);
    ASSERT_TRUE(pool.allocate(1 << 20).ok());
    auto third = pool.allocate(1 << 20);  // 3 segments + metadata > 3 MiB
    ASSERT_FALSE(third.ok());
    EXPECT_EQ(third.err().code, "budget_exceeded");
    EXPECT_EQ(pool.segment_count(), 2u);
    EXPECT_EQ(account.reserved(), pool.reserved_bytes());
  }
  EXPECT_EQ(account.reserved(), 0u);
  EXPECT_EQ(control->total_reserved(), 0u);
}

}  // namespace
}  // namespace orch::ipc
