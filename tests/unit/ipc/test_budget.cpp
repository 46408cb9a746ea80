// The pinned budget formula (docs/shared-memory.md) on fixture trees of /proc and /sys.
#include <gtest/gtest.h>

#include <limits>

#include "leak_check.hpp"

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/pinned_budget.hpp"

namespace orch::ipc {
namespace {

using pinned_budget_test = testing::leak_checked_test;

constexpr std::uint64_t gib = std::uint64_t{1} << 30;
constexpr std::uint64_t ram = 32 * gib;  // every fixture's MemTotal

std::filesystem::path fixture(const char* name) {
  return std::filesystem::path(ORCH_IPC_FIXTURES) / name;
}

memory_readings probe(const char* name, os_family os = os_family::linux_like) {
  auto readings = probe_memory_readings(fixture(name), os);
  EXPECT_TRUE(readings.ok()) << (readings.ok() ? "" : readings.err().message);
  return readings.ok() ? *readings : memory_readings{};
}

TEST_F(pinned_budget_test, no_cgroup_and_no_swaps_file_uses_ram_minus_16_gib) {
  const auto r = probe("no_cgroup");
  EXPECT_EQ(r.physical_ram, ram);
  EXPECT_FALSE(r.cgroup_limit.has_value());
  EXPECT_EQ(r.swap_total, 0u);
  // max(0.4·32, min(28.8, 28, 32 + 0 − 16)) = 16 GiB
  EXPECT_EQ(compute_pinned_budget(r).bytes, 16 * gib);
}

TEST_F(pinned_budget_test, cgroup_v1_limit_clamps_ram_and_drops_swap) {
  const auto r = probe("cgroup_v1");
  ASSERT_TRUE(r.cgroup_limit.has_value());
  EXPECT_EQ(*r.cgroup_limit, 8 * gib);
  EXPECT_EQ(r.swap_total, 4 * gib);  // read, but not counted under a limit
  const auto b = compute_pinned_budget(r);
  EXPECT_EQ(b.effective_ram, 8 * gib);
  EXPECT_EQ(b.counted_swap, 0u);
  // max(0.4·8 GiB, min(7.2, 4, 8 − 16)) = 0.4·8 GiB = 3435973836 bytes (floored)
  EXPECT_EQ(b.bytes, 3435973836u);
}

TEST_F(pinned_budget_test, cgroup_v1_unlimited_sentinel_is_no_limit) {
  const auto r = probe("cgroup_v1_unlimited");
  EXPECT_FALSE(r.cgroup_limit.has_value());
  EXPECT_EQ(compute_pinned_budget(r).bytes, 16 * gib);
}

TEST_F(pinned_budget_test, cgroup_v2_memory_max_clamps_ram) {
  const auto r = probe("cgroup_v2");
  ASSERT_TRUE(r.cgroup_limit.has_value());
  EXPECT_EQ(*r.cgroup_limit, 8 * gib);
  EXPECT_EQ(compute_pinned_budget(r).bytes, 3435973836u);
}

TEST_F(pinned_budget_test, nested_cgroup_v2_limits_take_the_smallest_ancestor) {
  const auto r = probe("cgroup_v2_nested");
  ASSERT_TRUE(r.cgroup_limit.has_value());
  EXPECT_EQ(*r.cgroup_limit, 6 * gib);
  // 0.4 · 6 GiB = 2576980377.6, floored
  EXPECT_EQ(compute_pinned_budget(r).bytes, 2576980377u);
}

TEST_F(pinned_budget_test, limit_above_physical_ram_is_no_limit_and_swap_counts) {
  const auto r = probe("cgroup_v2_above_ram");
  EXPECT_FALSE(r.cgroup_limit.has_value());
  EXPECT_EQ(r.swap_total, 4 * gib);
  // min(28.8, 28, 32 + 4 − 16) = 20 GiB
  EXPECT_EQ(compute_pinned_budget(r).bytes, 20 * gib);
}

TEST_F(pinned_budget_test, zram_swap_is_skipped_even_behind_a_link_and_disk_swap_counts) {
  const auto r = probe("swap_zram_and_disk");
  EXPECT_EQ(r.swap_total, 6 * gib);  // /swapfile 4 GiB + /dev/sda3 2 GiB
  EXPECT_EQ(compute_pinned_budget(r).bytes, 22 * gib);
}

TEST_F(pinned_budget_test, missing_proc_swaps_means_no_swap) {
  EXPECT_EQ(read_swap_total(fixture("no_cgroup")), 0u);
}

TEST_F(pinned_budget_test, windows_is_forty_percent_of_ram_whatever_the_swap) {
  auto r = probe("swap_zram_and_disk", os_family::windows);
  // 0.4 · 32 GiB = 13743895347.2, floored
  EXPECT_EQ(compute_pinned_budget(r).bytes, 13743895347u);
}

TEST_F(pinned_budget_test, large_machine_is_capped_at_ninety_percent) {
  memory_readings r;
  r.physical_ram = 256 * gib;
  r.swap_total = 64 * gib;
  // min(0.9·256, 252, 304) = 230.4 GiB
  EXPECT_EQ(compute_pinned_budget(r).bytes, 247390116249u);
}

TEST_F(pinned_budget_test, small_machine_never_drops_below_forty_percent) {
  memory_readings r;
  r.physical_ram = 2 * gib;
  EXPECT_EQ(compute_pinned_budget(r).bytes, 858993459u);  // 0.4 · 2 GiB, floored
}

// 2^52 KiB of RAM (2^62 bytes) and swap entries of 2^52 and 2^60 KiB: the second alone wraps a
// 64-bit byte count, and RAM + swap overflows a signed 64-bit sum. Readings saturate, and the
// formula stays defined (the asan preset runs this under UBSan) and picks 0.9·RAM.
TEST_F(pinned_budget_test, huge_readings_saturate_instead_of_wrapping_or_overflowing) {
  const auto r = probe("huge_readings");
  EXPECT_EQ(r.physical_ram, std::uint64_t{1} << 62);
  EXPECT_EQ(r.swap_total, std::numeric_limits<std::uint64_t>::max());
  const auto b = compute_pinned_budget(r);
  EXPECT_EQ(b.effective_ram, std::uint64_t{1} << 62);
  EXPECT_EQ(b.counted_swap, std::numeric_limits<std::uint64_t>::max());
  // min(0.9 · 2^62, 2^62 − 4 GiB, saturated − 16 GiB) = 0.9 · 2^62, floored
  EXPECT_EQ(b.bytes, 4150517416584649113u);
}

TEST_F(pinned_budget_test, largest_representable_readings_give_ninety_percent_of_ram) {
  memory_readings r;
  r.physical_ram = std::numeric_limits<std::uint64_t>::max();
  r.swap_total = std::numeric_limits<std::uint64_t>::max();
  // 0.9 · (2^64 − 1), floored
  EXPECT_EQ(compute_pinned_budget(r).bytes, 16602069666338596453u);
}

TEST_F(pinned_budget_test, huge_swap_on_a_small_machine_leaves_ram_minus_4_gib) {
  memory_readings r;
  r.physical_ram = 32 * gib;
  r.swap_total = std::numeric_limits<std::uint64_t>::max();
  // min(28.8, 28, saturated) = 28 GiB
  EXPECT_EQ(compute_pinned_budget(r).bytes, 28 * gib);
}

TEST_F(pinned_budget_test, this_machine_probes_to_a_budget_within_the_formula_bounds) {
  auto r = probe_memory_readings("/");
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_GT(r->physical_ram, 0u);
  const auto b = compute_pinned_budget(*r);
  EXPECT_GE(b.bytes, b.effective_ram / 5 * 2);       // never below 0.4·RAM
  EXPECT_LE(b.bytes, b.effective_ram / 10 * 9 + 1);  // never above 0.9·RAM
}

// The one /proc/meminfo reader: any field by name (serve's /system_stats reads MemAvailable), a
// missing field an error naming it.
TEST_F(pinned_budget_test, meminfo_fields_are_read_by_name) {
  auto available = read_meminfo(fixture("no_cgroup"), "MemAvailable");
  ASSERT_TRUE(available.ok()) << available.err().message;
  EXPECT_EQ(*available, std::uint64_t{20000000} * 1024);
  auto absent = read_meminfo(fixture("no_cgroup"), "HugePages_Surp");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.err().message.find("HugePages_Surp"), std::string::npos);
}

TEST_F(pinned_budget_test, missing_meminfo_is_an_error) {
  auto r = probe_memory_readings(fixture("does_not_exist"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, "no_meminfo");
}

}  // namespace
}  // namespace orch::ipc
