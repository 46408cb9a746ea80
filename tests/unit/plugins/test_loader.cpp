// The loader: real dlopen, one error code per cause (docs/errors.md), idempotent lifecycle.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>

#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;

std::string code_of(const char* path) {
  auto lib = plugin_library::open(path);
  return lib ? "ok" : lib.err().code;
}

TEST(plugin_loader, a_missing_file_is_not_found) {
  EXPECT_EQ(code_of("/nonexistent/orch-pager-none.so"), "not_found");
}

TEST(plugin_loader, a_file_that_is_not_a_shared_object_fails_to_load) {
  const auto path = std::filesystem::temp_directory_path() / "orch-loader-junk.so";
  std::ofstream(path) << "not an ELF file";
  EXPECT_EQ(code_of(path.c_str()), "load_failed");
  std::filesystem::remove(path);
}

TEST(plugin_loader, a_library_without_the_entry_symbol_is_not_a_plugin) {
  EXPECT_EQ(code_of(ORCH_FIXTURE_1), "not_a_plugin");
}

TEST(plugin_loader, a_different_abi_major_is_an_abi_mismatch) {
  auto lib = plugin_library::open(ORCH_FIXTURE_2);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.err().code, "abi_mismatch");
  EXPECT_NE(lib.err().message.find("ABI major 99"), std::string::npos) << lib.err().message;
}

TEST(plugin_loader, an_inverted_level_range_is_an_invalid_table) {
  EXPECT_EQ(code_of(ORCH_FIXTURE_3), "invalid_table");
}

// The table is untrusted: its strings reach logs and `comfy-orch plugins --json`, whose JSON
// writer aborts on bytes that are not UTF-8.
TEST(plugin_loader, a_name_that_is_not_utf8_is_an_invalid_table) {
  EXPECT_EQ(code_of(ORCH_FIXTURE_6), "invalid_table");
}

// NULL is a plugin's answer for a major it cannot serve (docs/plugin-abi.md, "Versions").
TEST(plugin_loader, a_plugin_that_serves_no_major_this_host_speaks_is_an_abi_mismatch) {
  auto lib = plugin_library::open(ORCH_FIXTURE_5);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.err().code, "abi_mismatch");
  EXPECT_NE(lib.err().message.find("serves none of the plugin ABI majors"), std::string::npos)
      << lib.err().message;
}

// Kinds, backends and levels are open sets (plugin.h): a plugin built for a newer host is
// skipped as unsupported, never taken for a broken one.
TEST(plugin_loader, a_backend_this_host_does_not_know_yet_is_unsupported_not_invalid) {
  auto lib = plugin_library::open(ORCH_FIXTURE_9);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.err().code, "unsupported_plugin");
  EXPECT_NE(lib.err().message.find("backend 99"), std::string::npos) << lib.err().message;
}

TEST(plugin_loader, a_level_above_l4_is_unsupported_not_invalid) {
  auto lib = plugin_library::open(ORCH_FIXTURE_10);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.err().code, "unsupported_plugin");
  EXPECT_NE(lib.err().message.find("[1, 7]"), std::string::npos) << lib.err().message;
}

TEST(plugin_loader, a_plugin_kind_this_host_does_not_know_yet_is_unsupported_not_invalid) {
  auto lib = plugin_library::open(ORCH_FIXTURE_11);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.err().code, "unsupported_plugin");
  EXPECT_NE(lib.err().message.find("plugin kind 9"), std::string::npos) << lib.err().message;
}

// Every plugin built here reads the major the host asks for: it serves major 1, at any minor,
// and answers NULL for any other, so a host of a later major can fall back to adapting its v1
// table (NCCL's pattern).
TEST(plugin_loader, every_built_plugin_serves_major_1_and_answers_null_for_any_other_major) {
  int plugins = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ORCH_PLUGIN_BUILD_DIR)) {
    if (entry.path().extension() != ".so") continue;
    void* handle = dlopen(entry.path().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << entry.path() << ": " << dlerror();
    const auto query =
        reinterpret_cast<orch_plugin_query_fn>(dlsym(handle, ORCH_PLUGIN_ENTRY_SYMBOL));
    ASSERT_NE(query, nullptr) << entry.path();
    ++plugins;
    const orch_plugin_table* t = query(1, ORCH_PLUGIN_ABI_MINOR);
    ASSERT_NE(t, nullptr) << entry.path();
    EXPECT_EQ(t->abi_major, 1u);
    EXPECT_EQ(query(1, 0), t) << entry.path();   // an older minor of major 1
    EXPECT_EQ(query(1, 99), t) << entry.path();  // a newer one: it reads what it knows
    EXPECT_EQ(query(0, 0), nullptr) << entry.path();
    EXPECT_EQ(query(2, 0), nullptr) << entry.path();
    EXPECT_EQ(query(99, 1), nullptr) << entry.path();
    dlclose(handle);
  }
  EXPECT_GE(plugins, 9);
}

TEST(plugin_loader, a_failed_init_leaves_the_plugin_down) {
  auto lib = plugin_library::open(ORCH_FIXTURE_4);
  ASSERT_TRUE(lib) << lib.err().message;
  auto st = (*lib)->init();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.err().code, "init_failed");
  EXPECT_FALSE((*lib)->initialised());
}

TEST(plugin_loader, init_and_shutdown_are_idempotent_and_the_real_path_is_kept) {
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(lib) << lib.err().message;
  EXPECT_EQ((*lib)->real_path(), std::filesystem::canonical(ORCH_TEST_PLUGIN_PAGER_SIM));
  ASSERT_TRUE((*lib)->init());
  ASSERT_TRUE((*lib)->init());
  EXPECT_TRUE((*lib)->initialised());
  EXPECT_EQ((*lib)->table().init(nullptr), ORCH_ALREADY_INITIALISED);
  (*lib)->shutdown();
  (*lib)->shutdown();
  EXPECT_FALSE((*lib)->initialised());
  ASSERT_TRUE((*lib)->init());  // and it comes back up
}

TEST(backend_device, a_backend_table_without_its_required_entries_is_refused_before_any_call) {
  auto d = orch::plugins::backend_device::open(ORCH_FIXTURE_7, 0, -1);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.err().code, "invalid_table");
  EXPECT_NE(d.err().message.find("no device_count"), std::string::npos) << d.err().message;
}

TEST(backend_device, a_backend_table_is_checked_for_size_and_paired_registration) {
  using orch::plugins::check_backend_api;
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM);
  ASSERT_TRUE(lib) << lib.err().message;
  orch_backend_api api = *(*lib)->table().backend_api;
  EXPECT_TRUE(check_backend_api(api, "sim"));
  orch_backend_api unlockable = api;  // a backend that cannot page-lock at all is fine
  unlockable.host_register = nullptr;
  unlockable.host_unregister = nullptr;
  EXPECT_TRUE(check_backend_api(unlockable, "sim"));
  orch_backend_api half = api;
  half.host_unregister = nullptr;
  EXPECT_EQ(check_backend_api(half, "sim").err().code, "invalid_table");
  orch_backend_api shorter = api;
  shorter.struct_size = offsetof(orch_backend_api, synchronize);
  const auto st = check_backend_api(shorter, "sim");
  ASSERT_FALSE(st);
  EXPECT_NE(st.err().message.find("below the"), std::string::npos) << st.err().message;
  orch_backend_api older = api;  // built before the appended entries: still a backend
  older.struct_size = offsetof(orch_backend_api, now_ns);
  EXPECT_TRUE(check_backend_api(older, "sim"));
}

TEST(plugin_loader, plugins_export_only_their_entry_points) {
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(lib);
  EXPECT_NE((*lib)->symbol("orch_plugin_query"), nullptr);
  EXPECT_EQ((*lib)->symbol("orch_torch_malloc"), nullptr);
  auto alloc = plugin_library::open(ORCH_TEST_PLUGIN_ALLOCATOR_SIM);
  ASSERT_TRUE(alloc);
  EXPECT_NE((*alloc)->symbol("orch_torch_malloc"), nullptr);
  EXPECT_NE((*alloc)->symbol("orch_torch_free"), nullptr);
}

}  // namespace
