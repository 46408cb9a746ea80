// Injection at the host's level (docs/memory-semantics.md), on synthetic registries and on the
// plugins this build produced.
#include <gtest/gtest.h>

#include "orch/plugin/plugin.h"
#include "orch/runtime/plugin_selection.hpp"

namespace orch::runtime {
namespace {

plugins::plugin_entry entry(std::string name, std::string kind, std::string backend,
                            uint32_t min_level, uint32_t max_level, std::string version = "1.0",
                            uint64_t caps = 0) {
  plugins::plugin_entry e;
  e.name = std::move(name);
  e.kind = std::move(kind);
  e.backend = std::move(backend);
  e.min_level = min_level;
  e.max_level = max_level;
  e.version = std::move(version);
  e.capabilities = caps;
  return e;
}

TEST(plugin_selection, plugin_whose_range_contains_the_host_level_is_chosen) {
  const std::vector<plugins::plugin_entry> found = {
      entry("sim-pager", "pager", "sim", 1, 4), entry("sim-allocator", "allocator", "sim", 1, 4)};
  const auto host = host_pager(found, "sim");
  ASSERT_TRUE(host);
  const auto c = choose_worker_plugins(found, "sim", host->max_level, &*host, {});
  ASSERT_TRUE(c.pager);
  EXPECT_EQ(c.pager->name, "sim-pager");
  EXPECT_EQ(c.level, 4u);
  EXPECT_FALSE(c.adapted);
  EXPECT_TRUE(c.dropped.empty());
  EXPECT_TRUE(c.notes.empty());
  ASSERT_TRUE(c.allocator);
  EXPECT_EQ(c.allocator->name, "sim-allocator");
}

TEST(plugin_selection, host_at_l4_with_only_an_l2_plugin_gets_the_adapter_and_drop_lines) {
  const std::vector<plugins::plugin_entry> found = {entry("cuda-pager", "pager", "cuda", 1, 4),
                                                    entry("sim-pager-l2", "pager", "sim", 2, 2)};
  const auto host = host_pager(found, "cuda");
  pager_settings settings;
  settings.extra_headroom = 1ull << 30;
  const auto c = choose_worker_plugins(found, "sim", 4, &*host, settings);
  ASSERT_TRUE(c.pager);
  EXPECT_EQ(c.pager->name, "sim-pager-l2");
  EXPECT_EQ(c.level, 2u);
  EXPECT_TRUE(c.adapted);
  const auto lines = dropped_setting_lines("img-nodes", c);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "env img-nodes: pager sim-pager-l2 speaks L2, host speaks L4: dropped "
            "simple_headroom=268435456 (needs L3)");
  EXPECT_EQ(lines[1],
            "env img-nodes: pager sim-pager-l2 speaks L2, host speaks L4: dropped "
            "extra_headroom=1073741824 (needs L3)");
  EXPECT_NE(lines[2].find("dropped pressure_source=0 (needs L4)"), std::string::npos);
  EXPECT_NE(lines[3].find("dropped log_callback=on (needs L4)"), std::string::npos);
}

TEST(plugin_selection, l3_adapter_drops_only_what_l3_cannot_express) {
  const std::vector<plugins::plugin_entry> found = {entry("p3", "pager", "sim", 3, 3)};
  const auto c = choose_worker_plugins(found, "sim", 4, nullptr, {});
  ASSERT_TRUE(c.adapted);
  ASSERT_EQ(c.dropped.size(), 2u);
  EXPECT_EQ(c.dropped[0].name, "pressure_source");
  EXPECT_EQ(c.dropped[1].name, "log_callback");
}

TEST(plugin_selection, the_highest_level_below_the_host_is_preferred) {
  const std::vector<plugins::plugin_entry> found = {entry("a-l1", "pager", "sim", 1, 1),
                                                    entry("b-l3", "pager", "sim", 2, 3)};
  const auto c = choose_worker_plugins(found, "sim", 4, nullptr, {});
  ASSERT_TRUE(c.pager);
  EXPECT_EQ(c.pager->name, "b-l3");
  EXPECT_EQ(c.level, 3u);
}

TEST(plugin_selection, no_pager_for_the_backend_gives_the_ledger_with_the_reason) {
  const std::vector<plugins::plugin_entry> found = {
      entry("sim-pager", "pager", "sim", 1, 4),
      entry("cpu-ledger", "pager", "cpu", 1, 4, "1.0", ORCH_CAP_LEDGER),
      entry("cpu-allocator", "allocator", "cpu", 1, 4)};
  const auto c = choose_worker_plugins(found, "cpu", 4, nullptr, {});
  EXPECT_FALSE(c.pager);
  EXPECT_EQ(c.ledger_reason, "no pager plugin for backend cpu");
  ASSERT_TRUE(c.ledger);
  EXPECT_EQ(c.ledger->name, "cpu-ledger");
  // The allocator is injected on every backend, cpu included.
  ASSERT_TRUE(c.allocator);
  EXPECT_EQ(c.allocator->name, "cpu-allocator");
}

TEST(plugin_selection, a_pager_only_above_the_host_level_is_not_usable) {
  const std::vector<plugins::plugin_entry> found = {entry("p4", "pager", "sim", 4, 4)};
  const auto c = choose_worker_plugins(found, "sim", 2, nullptr, {});
  EXPECT_FALSE(c.pager);
  EXPECT_EQ(c.ledger_reason, "no pager plugin for backend sim");
}

TEST(plugin_selection, version_difference_is_a_note_and_never_a_fallback) {
  const std::vector<plugins::plugin_entry> found = {
      entry("sim-pager", "pager", "sim", 1, 4, "0.3")};
  const auto host = entry("sim-pager", "pager", "sim", 1, 4, "0.4");
  const auto c = choose_worker_plugins(found, "sim", 4, &host, {});
  ASSERT_TRUE(c.pager);
  EXPECT_FALSE(c.ledger_reason);
  EXPECT_FALSE(c.adapted);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "pager sim-pager 0.3, host pager sim-pager 0.4: versions differ, protocol level L4 "
            "matches; proceeding");
}

TEST(plugin_selection, the_host_pagers_own_name_wins_among_equals) {
  const std::vector<plugins::plugin_entry> found = {entry("alt-pager", "pager", "sim", 1, 4),
                                                    entry("sim-pager", "pager", "sim", 1, 4)};
  const auto host = entry("sim-pager", "pager", "sim", 1, 4);
  const auto c = choose_worker_plugins(found, "sim", 4, &host, {});
  EXPECT_EQ(c.pager->name, "sim-pager");
}

TEST(plugin_selection, ledgers_are_never_chosen_as_pagers) {
  const std::vector<plugins::plugin_entry> found = {
      entry("sim-ledger", "pager", "sim", 1, 4, "1.0", ORCH_CAP_LEDGER)};
  EXPECT_FALSE(host_pager(found, "sim"));
  const auto c = choose_worker_plugins(found, "sim", 4, nullptr, {});
  EXPECT_FALSE(c.pager);
  EXPECT_EQ(c.ledger->name, "sim-ledger");
}

TEST(plugin_selection, built_plugins_give_the_sim_pager_at_l4) {
  const auto report = plugins::scan_directories({ORCH_PLUGIN_BUILD_DIR});
  const auto host = host_pager(report.plugins, "sim");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->name, "sim-pager");
  EXPECT_EQ(host->max_level, 4u);
  const auto c = choose_worker_plugins(report.plugins, "sim", host->max_level, &*host, {});
  EXPECT_EQ(c.pager->name, "sim-pager");
  EXPECT_EQ(c.allocator->name, "sim-allocator");
  // Without the full sim pager, the L2 and L3-L4 variants remain: L3-L4 contains L4.
  std::vector<plugins::plugin_entry> variants;
  for (const auto& e : report.plugins) {
    if (e.name != "sim-pager") variants.push_back(e);
  }
  EXPECT_EQ(choose_worker_plugins(variants, "sim", 4, &*host, {}).pager->name, "sim-pager-l3l4");
  // With only the L2 variant, the adapter.
  std::vector<plugins::plugin_entry> l2_only;
  for (const auto& e : report.plugins) {
    if (e.name != "sim-pager" && e.name != "sim-pager-l3l4") l2_only.push_back(e);
  }
  const auto adapted = choose_worker_plugins(l2_only, "sim", 4, &*host, {});
  EXPECT_EQ(adapted.pager->name, "sim-pager-l2");
  EXPECT_TRUE(adapted.adapted);
}

}  // namespace
}  // namespace orch::runtime
