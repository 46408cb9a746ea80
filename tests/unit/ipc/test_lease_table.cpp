// Leases: reference counts, limbo, and release of a dead process's leases.
#include <gtest/gtest.h>

#include "leak_check.hpp"
#include "orch/ipc/lease_table.hpp"

#include <memory>

namespace orch::ipc {
namespace {

class lease_table_test : public testing::leak_checked_test {
 protected:
  void SetUp() override {
    testing::leak_checked_test::SetUp();
    owned_pool = std::make_unique<pinned_pool>(pool_options{1 << 20, 4096, 1}, registrar);
    owned_leases = std::make_unique<lease_table>(*owned_pool);
  }
  void TearDown() override {
    owned_leases.reset();
    owned_pool.reset();
    testing::leak_checked_test::TearDown();
  }
  noop_pin_registrar registrar;
  std::unique_ptr<pinned_pool> owned_pool;
  std::unique_ptr<lease_table> owned_leases;
  pinned_pool& pool() { return *owned_pool; }
  lease_table& leases() { return *owned_leases; }
  static constexpr process_id producer = 1, consumer = 2, other = 3;
};

TEST_F(lease_table_test, block_freed_while_held_waits_in_limbo_until_the_last_release) {
  auto d = leases().allocate(producer, 1000);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(leases().acquire(*d, consumer).ok());
  ASSERT_TRUE(leases().free(*d, producer).ok());
  EXPECT_EQ(leases().limbo_blocks(), 1u);
  EXPECT_EQ(leases().limbo_bytes(), 1000u);
  EXPECT_TRUE(pool().validate(*d).ok());
  // A holder may still pass it on; the block lives until the last of those leases goes.
  ASSERT_TRUE(leases().acquire(*d, other).ok());
  ASSERT_TRUE(leases().release(*d, consumer).ok());
  EXPECT_TRUE(pool().validate(*d).ok());
  ASSERT_TRUE(leases().release(*d, other).ok());
  EXPECT_EQ(leases().live_blocks(), 0u);
  EXPECT_EQ(pool().validate(*d).err().code, "stale_generation");
  EXPECT_EQ(pool().bytes_in_use(), 0u);
}

TEST_F(lease_table_test, leases_are_counted_per_holder) {
  auto d = leases().allocate(producer, 10);
  ASSERT_TRUE(leases().acquire(*d, consumer).ok());
  ASSERT_TRUE(leases().acquire(*d, consumer).ok());
  EXPECT_EQ(leases().leases(*d, consumer), 2u);
  ASSERT_TRUE(leases().release(*d, consumer).ok());
  EXPECT_EQ(leases().leases(*d, consumer), 1u);
  EXPECT_EQ(leases().release(*d, other).err().code, "not_held");
  EXPECT_EQ(leases().free(*d, consumer).err().code, "not_owner");
  ASSERT_TRUE(leases().free(*d, producer).ok());
  EXPECT_EQ(leases().free(*d, producer).err().code, "in_limbo");  // freed twice
}

TEST_F(lease_table_test, dead_producer_releases_its_leases_but_delivered_blocks_stay_valid) {
  auto delivered = leases().allocate(producer, 10);
  auto kept = leases().allocate(producer, 10);
  ASSERT_TRUE(delivered.ok() && kept.ok());
  ASSERT_TRUE(leases().acquire(*delivered, consumer).ok());
  ASSERT_TRUE(leases().acquire(*kept, producer).ok());  // two leases of its own
  EXPECT_EQ(leases().release_process(producer), 3u);
  EXPECT_TRUE(pool().validate(*delivered).ok());
  EXPECT_EQ(pool().validate(*kept).err().code, "stale_generation");
  EXPECT_EQ(leases().limbo_blocks(), 1u);
  ASSERT_TRUE(leases().release(*delivered, consumer).ok());
  EXPECT_EQ(pool().bytes_in_use(), 0u);
}

TEST_F(lease_table_test, stale_or_out_of_bounds_descriptors_are_refused) {
  auto d = leases().allocate(producer, 4096);
  ASSERT_TRUE(d.ok());
  buffer_descriptor bigger = *d;
  bigger.size = 4097;
  EXPECT_EQ(leases().acquire(bigger, consumer).err().code, "out_of_bounds");
  buffer_descriptor old = *d;
  old.generation += 100;
  EXPECT_EQ(leases().acquire(old, consumer).err().code, "stale_generation");
}

}  // namespace
}  // namespace orch::ipc
