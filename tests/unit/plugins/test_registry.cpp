// The registry behind `comfy-orch plugins`: every built plugin listed with its kind, backend,
// version, levels and capabilities; every skipped file with its problem.
#include <gtest/gtest.h>

#include <filesystem>

#include "orch/plugins/registry.hpp"

namespace {

namespace fs = std::filesystem;
using orch::plugins::scan_directories;

const orch::plugins::plugin_entry* find(const orch::plugins::registry_report& r,
                                        const std::string& name) {
  for (const auto& p : r.plugins)
    if (p.name == name) return &p;
  return nullptr;
}

TEST(plugin_registry, lists_every_built_plugin_with_kind_backend_levels_and_capabilities) {
  const auto report = scan_directories({ORCH_PLUGIN_BUILD_DIR});
  EXPECT_TRUE(report.skipped.empty());
  const auto* pager = find(report, "sim-pager");
  ASSERT_NE(pager, nullptr);
  EXPECT_EQ(pager->kind, "pager");
  EXPECT_EQ(pager->backend, "sim");
  EXPECT_EQ(pager->min_level, 1u);
  EXPECT_EQ(pager->max_level, 4u);
  const auto* l2 = find(report, "sim-pager-l2");
  ASSERT_NE(l2, nullptr);
  EXPECT_EQ(l2->max_level, 2u);
  for (const char* name : {"sim-backend", "cpu-backend", "sim-allocator", "cpu-allocator",
                           "sim-ledger", "cpu-ledger", "sim-pager-l3l4"})
    EXPECT_NE(find(report, name), nullptr) << name;
  const auto json = orch::plugins::to_json(report);
  EXPECT_EQ(json["plugins"].size(), report.plugins.size());
  const std::string table = orch::plugins::format_table(report);
  EXPECT_NE(table.find("sim-pager-l3l4"), std::string::npos);
  EXPECT_NE(table.find("L3-L4"), std::string::npos);
}

TEST(plugin_registry, skipped_files_and_directories_carry_their_problem) {
  const fs::path dir = fs::temp_directory_path() / ("orch-registry-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(ORCH_FIXTURE_1, dir / "no-entry.so");
  fs::copy_file(ORCH_FIXTURE_2, dir / "old-abi.so");
  fs::copy_file(ORCH_TEST_PLUGIN_PAGER_SIM, dir / "orch-pager-sim.so");
  const auto report = scan_directories({dir, dir / "missing"});
  ASSERT_EQ(report.plugins.size(), 1u);
  ASSERT_EQ(report.skipped.size(), 3u);
  std::vector<std::string> codes;
  for (const auto& s : report.skipped) codes.push_back(s.code);
  EXPECT_EQ(codes, (std::vector<std::string>{"not_a_plugin", "abi_mismatch", "not_found"}));
  const auto json = orch::plugins::to_json(report);
  EXPECT_EQ(json["skipped"][1]["code"], "abi_mismatch");
  fs::remove_all(dir);
}

}  // namespace

namespace {

TEST(plugin_path, relative_entries_follow_the_base_and_empty_ones_are_skipped) {
  const auto dirs = orch::plugins::split_plugin_path("/abs/a::rel/b:../c:", "/packs/p/nodes");
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/abs/a");
  EXPECT_EQ(dirs[1], "/packs/p/nodes/rel/b");
  EXPECT_EQ(dirs[2], "/packs/p/c");
  EXPECT_EQ(orch::plugins::split_plugin_path("x:y", {}),
            (std::vector<std::filesystem::path>{"x", "y"}));
}

}  // namespace
