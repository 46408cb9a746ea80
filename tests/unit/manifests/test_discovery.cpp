// Node-directory discovery, pack listing, collisions and env states, following comfy-env's
// install-time discovery (docs/references.md, comfy-env §1.4; its test_discovery.py pairs).
#include <sys/stat.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/discovery.hpp"
#include "orch/manifests/env_workspace.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;
using testing::temp_dir;

std::vector<std::string> discovered_names(const fs::path& custom_nodes, diagnostics& diags) {
  std::vector<pack_layout> packs;
  std::vector<std::string> names;
  for (const auto& dir : list_custom_nodes(custom_nodes))
    packs.push_back(discover_pack(dir, diags));
  check_env_name_collisions(packs, diags);
  for (const auto& p : packs) {
    for (const auto& n : p.node_dirs) names.push_back(n.env_name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(discovery, a_manifest_that_is_not_a_regular_file_is_warned_about_not_dropped_silently) {
  temp_dir root;
  const fs::path pack = root.path() / "ComfyUI-Odd";
  fs::create_directories(pack / "nodes" / "comfy-env.toml");  // a directory
  fs::create_directories(pack / "nodes" / "fifo");
  ASSERT_EQ(::mkfifo((pack / "nodes" / "fifo" / "comfy-env.toml").c_str(), 0600), 0);
  fs::create_directories(pack / "nodes" / "loop");
  fs::create_symlink("comfy-env.toml", pack / "nodes" / "loop" / "comfy-env.toml");
  fs::create_directories(pack / "nodes" / "zero");
  fs::create_symlink("/dev/zero", pack / "nodes" / "zero" / "comfy-env.toml");
  diagnostics diags;
  const auto layout = discover_pack(pack, diags);
  EXPECT_TRUE(layout.node_dirs.empty());
  std::vector<std::string> messages;
  for (const auto& d : diags.items()) {
    EXPECT_EQ(d.level, severity::warning) << d.format();
    messages.push_back(d.message);
  }
  ASSERT_EQ(messages.size(), 4u);
  auto has = [&](const std::string& text) {
    return std::any_of(messages.begin(), messages.end(),
                       [&](const std::string& m) { return m.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("is a directory"));
  EXPECT_TRUE(has("is a FIFO"));
  EXPECT_TRUE(has("cannot be followed"));
  EXPECT_TRUE(has("is a device"));
}

TEST(discovery, nodes_and_nodes_children_are_bound) {
  temp_dir tmp;
  tmp.write("custom_nodes/ComfyUI-A/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-B/nodes/x/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-B/nodes/y/comfy-env.toml", "");
  diagnostics diags;
  EXPECT_EQ(discovered_names(tmp.path() / "custom_nodes", diags),
            (std::vector<std::string>{"a-nodes", "b-x", "b-y"}));
  EXPECT_FALSE(diags.has_errors());
}

TEST(discovery, root_deep_and_vendored_configs_are_not_bound) {
  temp_dir tmp;
  tmp.write("custom_nodes/ComfyUI-P/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-P/nodes/a/deep/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-P/vendored/third_party/comfy-env.toml", "");
  diagnostics diags;
  EXPECT_TRUE(discovered_names(tmp.path() / "custom_nodes", diags).empty());
  // The pack-root file is said out loud, as a warning.
  const auto* w = testing::find(diags, "comfy-env.toml", severity::warning);
  ASSERT_NE(w, nullptr);
  EXPECT_NE(w->message.find("not bound"), std::string::npos);
}

TEST(discovery, two_configs_deriving_one_name_is_an_error_naming_both) {
  temp_dir tmp;
  tmp.write("custom_nodes/ComfyUI-Foo/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/comfyui_foo/nodes/comfy-env.toml", "");
  diagnostics diags;
  (void)discovered_names(tmp.path() / "custom_nodes", diags);
  ASSERT_EQ(diags.count(severity::error), 1u);
  const auto& e = diags.items().back();
  EXPECT_EQ(e.key, "foo-nodes");
  EXPECT_NE(e.message.find("BOTH"), std::string::npos);
  EXPECT_NE(e.message.find("ComfyUI-Foo"), std::string::npos);
  EXPECT_NE(e.message.find("comfyui_foo"), std::string::npos);
}

TEST(discovery, disabled_and_hidden_packs_are_skipped) {
  temp_dir tmp;
  tmp.write("custom_nodes/ComfyUI-Live/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-Old.disabled/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/ComfyUI-Older._disabled/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/.hidden/nodes/comfy-env.toml", "");
  tmp.write("custom_nodes/_private/nodes/comfy-env.toml", "");
  diagnostics diags;
  EXPECT_EQ(discovered_names(tmp.path() / "custom_nodes", diags),
            std::vector<std::string>{"live-nodes"});
}

TEST(discovery, hidden_node_children_are_skipped) {
  temp_dir tmp;
  tmp.write("ComfyUI-Q/nodes/.cache/comfy-env.toml", "");
  tmp.write("ComfyUI-Q/nodes/_shared/comfy-env.toml", "");
  tmp.write("ComfyUI-Q/nodes/gpu/comfy-env.toml", "");
  diagnostics diags;
  const auto pack = discover_pack(tmp.path() / "ComfyUI-Q", diags);
  ASSERT_EQ(pack.node_dirs.size(), 1u);
  EXPECT_EQ(pack.node_dirs[0].env_name, "q-gpu");
  EXPECT_EQ(pack.node_dirs[0].relative_dir, fs::path("nodes/gpu"));
}

// ---- env states ----

class env_state_test : public ::testing::Test {
 protected:
  env_state_test() {
    tmp.write("ComfyUI-Depth/nodes/comfy-env.toml", "python = \"3.11\"\n");
    diagnostics d;
    pack = discover_pack(tmp.path() / "ComfyUI-Depth", d);
  }
  env_status state_of(const env_manifest& m) {
    return locate_env(pack.node_dirs.at(0), m, {tmp.path() / "ws", {tmp.path() / "lib"}});
  }
  temp_dir tmp;
  pack_layout pack;
};

TEST_F(env_state_test, python_env_missing_says_what_to_run) {
  env_manifest m;
  m.python = "3.11";
  const auto s = state_of(m);
  EXPECT_EQ(s.state, env_state::missing);
  EXPECT_EQ(s.path, tmp.path() / "ws" / "envs" / "depth-nodes");
  EXPECT_NE(s.detail.find("comfy-orch install"), std::string::npos);
  EXPECT_EQ(s.python_version, "3.11");
}

TEST_F(env_state_test, python_env_with_abi_tag_and_interpreter_is_ok) {
  tmp.write("ws/envs/depth-nodes-py313-torch2-10-cu128/.pixi/envs/default/bin/python", "");
  fs::create_directories(
      tmp.path() / "ws/envs/depth-nodes-py313-torch2-10-cu128/.pixi/envs/default/lib/python3.13");
  const auto s = state_of(env_manifest{});
  EXPECT_EQ(s.state, env_state::ok);
  EXPECT_EQ(s.path, tmp.path() / "ws/envs/depth-nodes-py313-torch2-10-cu128");
  EXPECT_EQ(s.python_version, "3.13");
}

TEST_F(env_state_test, adr_0039_underscore_seam_is_found) {
  tmp.write("ws/envs/depth-nodes_py313-torch2.8-cu128/.pixi/envs/default/bin/python", "");
  EXPECT_EQ(state_of(env_manifest{}).state, env_state::ok);
}

TEST_F(env_state_test, env_directory_without_interpreter_is_broken) {
  fs::create_directories(tmp.path() / "ws/envs/depth-nodes-py311-notorch/.pixi");
  const auto s = state_of(env_manifest{});
  EXPECT_EQ(s.state, env_state::broken);
  EXPECT_NE(s.detail.find("no interpreter"), std::string::npos);
}

TEST_F(env_state_test, a_similar_env_name_is_not_taken) {
  tmp.write("ws/envs/depth-nodes-extra/.pixi/envs/default/bin/python", "");
  EXPECT_EQ(state_of(env_manifest{}).state, env_state::missing);
}

TEST_F(env_state_test, native_library_found_in_library_paths_is_ok) {
  tmp.write("lib/libdepth.so", "");
  env_manifest m;
  m.worker.library = "libdepth.so";
  const auto s = state_of(m);
  EXPECT_EQ(s.state, env_state::ok);
  EXPECT_TRUE(s.native);
  EXPECT_EQ(s.path, tmp.path() / "lib" / "libdepth.so");
}

TEST_F(env_state_test, native_library_absent_is_missing) {
  env_manifest m;
  m.worker.library = "libdepth.so";
  const auto s = state_of(m);
  EXPECT_EQ(s.state, env_state::missing);
  EXPECT_NE(s.detail.find("library_paths"), std::string::npos);
}

TEST_F(env_state_test, native_library_path_in_existing_directory_but_absent_is_broken) {
  fs::create_directories(tmp.path() / "ComfyUI-Depth/nodes/build");
  env_manifest m;
  m.worker.library = "build/libdepth.so";
  EXPECT_EQ(state_of(m).state, env_state::broken);
}

// ---- inventory over a deployment ----

TEST(inventory, reads_explicit_and_discovered_packs_once) {
  temp_dir tmp;
  tmp.write("custom_nodes/ComfyUI-A/nodes/comfy-env.toml", "python = \"3.11\"\n");
  tmp.write("custom_nodes/ComfyUI-A/comfy-env-root.toml", "[types]\nMESH = \"custom\"\n");
  tmp.write("custom_nodes/ComfyUI-B/nodes/comfy-env.toml", "python = 3.10\n");  // error
  deployment d;
  d.env.root = tmp.path() / "ws";
  d.packs.paths = {tmp.path() / "custom_nodes" / "ComfyUI-A"};
  d.packs.custom_nodes = tmp.path() / "custom_nodes";
  diagnostics diags;
  const auto inv = build_inventory(d, diags);
  ASSERT_EQ(inv.packs.size(), 2u);
  EXPECT_EQ(inv.packs[0].layout.name, "ComfyUI-A");
  ASSERT_TRUE(inv.packs[0].root);
  EXPECT_EQ(inv.packs[0].root->types.size(), 1u);
  EXPECT_EQ(inv.env_count(), 1u);  // ComfyUI-B's manifest has an error and is left out
  const auto* e = testing::find(diags, "python");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->where.file.find("ComfyUI-B"), std::string::npos);
}

}  // namespace
}  // namespace orch::manifests
