// The registry behind `comfy-orch plugins`: every built plugin listed with its kind, backend,
// version, levels and capabilities; every skipped file with its problem.
#include <unistd.h>

#include <cstdlib>

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
  fs::copy_file(ORCH_FIXTURE_1, dir / "orch-no-entry.so");
  fs::copy_file(ORCH_FIXTURE_2, dir / "orch-old-abi.so");
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

// What `comfy-orch plugins` prints for a plugin built for a newer host: skipped, with a code and
// a message of its own, never "invalid".
TEST(plugin_registry, a_plugin_with_values_this_host_does_not_know_is_listed_as_unsupported) {
  const fs::path dir =
      fs::temp_directory_path() / ("orch-registry-new-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(ORCH_FIXTURE_9, dir / "orch-backend-99.so");
  fs::copy_file(ORCH_FIXTURE_10, dir / "orch-pager-l7.so");
  fs::copy_file(ORCH_FIXTURE_11, dir / "orch-kind-9.so");
  fs::copy_file(ORCH_TEST_PLUGIN_PAGER_SIM, dir / "orch-pager-sim.so");
  const auto report = scan_directories({dir});
  ASSERT_EQ(report.plugins.size(), 1u);
  ASSERT_EQ(report.skipped.size(), 3u);
  for (const auto& s : report.skipped) EXPECT_EQ(s.code, "unsupported_plugin") << s.message;
  const std::string table = orch::plugins::format_table(report);
  EXPECT_NE(table.find("[unsupported_plugin]"), std::string::npos) << table;
  EXPECT_NE(table.find("backend 99"), std::string::npos) << table;
  EXPECT_NE(table.find("not supported by this host"), std::string::npos) << table;
  EXPECT_EQ(orch::plugins::to_json(report)["skipped"][0]["code"], "unsupported_plugin");
  fs::remove_all(dir);
}

TEST(plugin_registry, a_library_not_named_like_a_plugin_is_never_loaded) {
  // A search path such as /lib/x86_64-linux-gnu: loading libmemusage.so there ran its
  // constructor inside the host. The fixture's constructor marks the process if it ever runs.
  const fs::path dir = fs::temp_directory_path() / ("orch-registry-names-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(ORCH_FIXTURE_8, dir / "libmemusage.so");
  ::unsetenv("ORCH_FIXTURE_CONSTRUCTOR_RAN");
  const auto report = scan_directories({dir});
  EXPECT_EQ(std::getenv("ORCH_FIXTURE_CONSTRUCTOR_RAN"), nullptr);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].code, "not_plugin_name");
  EXPECT_NE(report.skipped[0].message.find("orch-*.so"), std::string::npos);
  EXPECT_TRUE(report.plugins.empty());
  // The same library named like a plugin is loaded (to read its table): the mark proves the
  // test would see a load.
  fs::copy_file(ORCH_FIXTURE_8, dir / "orch-marked.so");
  (void)scan_directories({dir});
  EXPECT_NE(std::getenv("ORCH_FIXTURE_CONSTRUCTOR_RAN"), nullptr);
  fs::remove_all(dir);
}

TEST(plugin_registry, a_search_path_that_is_a_file_is_not_a_directory) {
  const auto report = scan_directories({"/etc/passwd"});
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].code, "not_a_directory");
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

namespace {

using orch::plugins::plugins_from_json;

TEST(plugin_list_json, a_report_reads_back_as_the_same_plugins) {
  const auto report = scan_directories({ORCH_PLUGIN_BUILD_DIR});
  ASSERT_FALSE(report.plugins.empty());
  const auto back =
      plugins_from_json(nlohmann::json::parse(orch::plugins::to_json(report).dump()));
  ASSERT_TRUE(back) << back.err().message;
  ASSERT_EQ(back->size(), report.plugins.size());
  for (std::size_t i = 0; i < back->size(); ++i) {
    const auto& a = (*back)[i];
    const auto& b = report.plugins[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.backend, b.backend);
    EXPECT_EQ(a.version, b.version);
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.real_path, b.real_path);
    EXPECT_EQ(a.min_level, b.min_level);
    EXPECT_EQ(a.max_level, b.max_level);
    EXPECT_EQ(a.capabilities, b.capabilities);
    EXPECT_EQ(a.abi_major, b.abi_major);
  }
}

TEST(plugin_list_json, what_the_loader_would_refuse_is_refused) {
  const auto report = scan_directories({ORCH_PLUGIN_BUILD_DIR});
  const nlohmann::json good = orch::plugins::to_json(report)["plugins"][0];
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json p = good;
    if (value.is_null()) {
      p.erase(key);
    } else {
      p[key] = std::move(value);
    }
    return nlohmann::json{{"plugins", nlohmann::json::array({p})}};
  };
  EXPECT_TRUE(plugins_from_json(with("name", good["name"])));
  const std::pair<const char*, nlohmann::json> refused[] = {
      {"name", nullptr},         {"name", 7},           {"name", ""},
      {"kind", "daemon"},        {"backend", "opencl"}, {"min_level", 0},
      {"max_level", 5},          {"min_level", -1},     {"abi", "2.0"},
      {"abi", "one"},            {"capability_bits", nullptr}, {"path", nullptr},
  };
  for (const auto& [key, value] : refused) {
    const auto r = plugins_from_json(with(key, value));
    EXPECT_FALSE(r) << key << " = " << value.dump();
    if (!r) {
      EXPECT_EQ(r.err().code, "bad_plugin_list");
    }
  }
  auto inverted = good;
  inverted["min_level"] = 4;
  inverted["max_level"] = 2;
  EXPECT_FALSE(plugins_from_json({{"plugins", nlohmann::json::array({inverted})}}));
  for (const auto& junk : {nlohmann::json(), nlohmann::json::array(), nlohmann::json{{"plugins", 3}},
                           nlohmann::json{{"plugins", nlohmann::json::array({1})}}}) {
    EXPECT_FALSE(plugins_from_json(junk)) << junk.dump();
  }
}

}  // namespace
