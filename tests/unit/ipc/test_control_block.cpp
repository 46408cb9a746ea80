// Control blocks: frozen layout, heartbeat, seqlock-published stats.
#include <gtest/gtest.h>

#include "leak_check.hpp"

#include <memory>
#include <thread>

#include "orch/ipc/control_block.hpp"

namespace orch::ipc {
namespace {

using control_block_test = testing::leak_checked_test;

stats_snapshot sample(std::uint64_t n) {
  stats_snapshot s{};
  s.memory_manager = memory_manager_kind::ledger;
  set_text(s.memory_manager_reason, "device is cpu");
  set_text(s.plugins[0].name, "orch-pager-sim");
  set_text(s.plugins[0].version, "0.1.0");
  s.plugins[0].level = 4;
  s.device_free_bytes = n;
  s.pager_resident_bytes = n;
  s.pinned_bytes = n;
  s.cast_buffer_bytes = n;
  s.cast_buffer_high_water = n;
  s.current_epoch = n;
  s.call_count = n;
  s.last_boundary_release_ns = n;
  return s;
}

TEST_F(control_block_test, fresh_block_has_header_and_zero_stats) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  EXPECT_TRUE(block->valid_header());
  auto s = block->read();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->call_count, 0u);
  EXPECT_EQ(s->memory_manager, memory_manager_kind::unknown);
}

TEST_F(control_block_test, published_snapshot_reads_back_whole) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  block->publish(sample(5));
  auto s = block->read();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(get_text(s->memory_manager_reason), "device is cpu");
  EXPECT_EQ(get_text(s->plugins[0].name), "orch-pager-sim");
  EXPECT_EQ(s->plugins[0].level, 4u);
  EXPECT_EQ(s->call_count, 5u);
}

TEST_F(control_block_test, heartbeat_counts_beats) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  block->beat();
  block->beat();
  EXPECT_EQ(block->heartbeat.load(), 2u);
}

TEST_F(control_block_test, reader_never_sees_a_torn_snapshot) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t n = 1; !stop.load(); ++n) {
      block->publish(sample(n));
      std::this_thread::yield();
    }
  });
  int consistent = 0, torn = 0;
  for (int i = 0; i < 20000; ++i) {
    // A read may give up (writer_stalled) while the writer never pauses; that is the bounded
    // retry contract, not an error. What it returns must never mix two snapshots.
    auto s = block->read(1u << 16);
    if (!s.ok()) continue;
    const bool same = s->device_free_bytes == s->last_boundary_release_ns &&
                      s->pinned_bytes == s->call_count &&
                      s->current_epoch == s->cast_buffer_high_water;
    (same ? consistent : torn) += 1;
  }
  stop = true;
  writer.join();
  EXPECT_EQ(torn, 0);
  EXPECT_GT(consistent, 0);
}

TEST_F(control_block_test, writer_dead_mid_publish_makes_readers_give_up) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  block->stats_sequence.store(7);  // odd: a publish that never finished
  auto s = block->read(100);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.err().code, "writer_stalled");
}

TEST_F(control_block_test, bad_magic_is_reported) {
  auto block = std::make_unique<control_block>();
  initialise_control_block(*block);
  block->magic = 0;
  auto s = block->read();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.err().code, "bad_block");
}

}  // namespace
}  // namespace orch::ipc
