// Env states against the host's stack (env_workspace.hpp): stamps and tags decide which env
// directory a worker runs in, an env built for another stack is stale and never runnable, and
// directories no pack maps to are orphans. Laid out the way comfy-env leaves a workspace, with
// its three spellings.
#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_workspace.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;

const host_stack host{"3.11", "2.10.0", "cu128"};  // abi py311-torch2.10-cu128

class env_states : public ::testing::Test {
 protected:
  env_states() {
    tmp.write("ComfyUI-Depth/nodes/comfy-env.toml",
              "python = \"3.11\"\n[pypi-dependencies]\nnumpy = \"*\"\n");
    diagnostics d;
    pack = discover_pack(tmp.path() / "ComfyUI-Depth", d);
    diagnostics md;
    manifest = *load_env_manifest(pack.node_dirs.at(0).config, md);
  }
  // An env directory with an interpreter and, unless `abi` is empty, a stamp.
  fs::path make_env(const std::string& dir, const std::string& abi,
                    const std::optional<std::string>& identity = std::nullopt) {
    const fs::path root = tmp.path() / "ws/envs" / dir;
    tmp.write(fs::relative(root / "bin/python", tmp.path()), "");
    fs::create_directories(root / "lib/python3.11");
    if (!abi.empty()) {
      env_stamp s;
      s.abi_tag = abi;
      s.provenance = "test";
      s.identity = identity;
      tmp.write(fs::relative(root / stamp_file_name, tmp.path()), env_stamp_text(s));
    }
    return root;
  }
  env_status locate() {
    return locate_env(pack.node_dirs.at(0), manifest,
                      {tmp.path() / "ws", {}, nullptr, &host, {"linux-64", "2.36"}});
  }
  std::string current_identity() { return locate().identity; }

  testing::temp_dir tmp;
  pack_layout pack;
  env_manifest manifest;
};

TEST_F(env_states, a_stamped_env_for_this_stack_is_ok) {
  make_env("depth-nodes_py311-torch2.10-cu128", "py311-torch2.10-cu128", current_identity());
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::ok) << s.detail;
  EXPECT_TRUE(s.runnable);
  EXPECT_EQ(s.stamp_note, "abi=py311-torch2.10-cu128 verified");
}

TEST_F(env_states, a_stamp_for_another_stack_is_stale_and_never_runs) {
  make_env("depth-nodes", "py312-torch2.8-cu126");
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::stale);
  EXPECT_FALSE(s.runnable);
  EXPECT_NE(s.detail.find("abi=py312-torch2.8-cu126"), std::string::npos) << s.detail;
  EXPECT_NE(s.detail.find("py311-torch2.10-cu128"), std::string::npos) << s.detail;
  EXPECT_NE(s.detail.find("comfy-orch install"), std::string::npos) << s.detail;
}

TEST_F(env_states, an_unstamped_env_named_for_another_stack_is_stale) {
  make_env("depth-nodes-py312-torch2-8-cu126", "");
  EXPECT_EQ(locate().state, env_state::stale);
}

TEST_F(env_states, an_unstamped_env_passes_unverified_as_comfy_env_lets_it) {
  make_env("depth-nodes", "");
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::ok);
  EXPECT_TRUE(s.runnable);
  EXPECT_EQ(s.stamp_note, "unstamped (not verified)");
}

TEST_F(env_states, a_changed_derivation_is_stale_but_still_runs) {
  make_env("depth-nodes_py311-torch2.10-cu128", "py311-torch2.10-cu128", "orch1:older");
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::stale);
  EXPECT_TRUE(s.runnable);
  EXPECT_NE(s.detail.find("dependencies changed"), std::string::npos) << s.detail;
}

TEST_F(env_states, three_spellings_are_ambiguous_and_the_matching_stamp_is_used) {
  make_env("depth-nodes", "py310-notorch");                         // pre-ABI name
  make_env("depth-nodes-py311-torch2-10-cu128", "");                // Aug-18 spelling
  const auto match = make_env("depth-nodes_py311-torch2.10-cu128",  // ADR-0039
                              "py311-torch2.10-cu128", current_identity());
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::ambiguous);
  EXPECT_TRUE(s.runnable);
  EXPECT_EQ(s.path, match);
  EXPECT_EQ(s.candidates.size(), 3u);
  EXPECT_NE(s.detail.find("depth-nodes (abi=py310-notorch)"), std::string::npos) << s.detail;
  EXPECT_NE(s.detail.find("depth-nodes-py311-torch2-10-cu128"), std::string::npos) << s.detail;
}

TEST_F(env_states, ambiguous_without_a_matching_stamp_uses_an_unverified_one_never_a_foreign) {
  make_env("depth-nodes", "py312-notorch");
  const auto unverified = make_env("depth-nodes-py311-torch2-10-cu128", "");
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::ambiguous);
  EXPECT_EQ(s.path, unverified);
}

TEST_F(env_states, directories_no_pack_maps_to_are_orphans) {
  make_env("depth-nodes_py311-torch2.10-cu128", "py311-torch2.10-cu128");
  make_env("gone-pack_py311-torch2.10-cu128", "py311-torch2.10-cu128");
  fs::create_directories(tmp.path() / "ws/envs/.locks");
  fs::create_directories(tmp.path() / "ws/envs/.depth-nodes.build-123");
  const auto s = locate();
  const auto orphans = find_orphan_envs(tmp.path() / "ws", s.candidates);
  ASSERT_EQ(orphans.size(), 1u);
  EXPECT_EQ(orphans[0].path.filename(), "gone-pack_py311-torch2.10-cu128");
  EXPECT_EQ(orphans[0].abi_tag, "py311-torch2.10-cu128");
}

TEST_F(env_states, another_packs_directory_that_only_starts_like_a_tag_is_not_this_envs) {
  make_env("depth-nodes_py311-torch2.10-cu128", "py311-torch2.10-cu128", current_identity());
  make_env("depth-nodes-pyramid", "");  // the env of a pack named "Depth-Nodes-Pyramid"
  const auto s = locate();
  EXPECT_EQ(s.state, env_state::ok) << s.detail;
  EXPECT_EQ(s.candidates.size(), 1u);
}

TEST(env_dir_names, the_tag_in_a_directory_name) {
  EXPECT_EQ(tag_in_dir_name("foo-pyramid", "foo"), "");
  EXPECT_EQ(tag_in_dir_name("foo_python-tools", "foo"), "");
  EXPECT_EQ(tag_in_dir_name("foo_py312-notorch", "foo"), "py312-notorch");
  EXPECT_EQ(tag_in_dir_name("foo_py311-torch2.10-cu128", "foo"), "py311-torch2.10-cu128");
  EXPECT_EQ(tag_in_dir_name("foo-py311-torch2-10-cu128", "foo"), "py311-torch2-10-cu128");
  EXPECT_EQ(tag_in_dir_name("foo", "foo"), "");
  EXPECT_EQ(tag_in_dir_name("foo-bar", "foo"), "");
}

}  // namespace
}  // namespace orch::manifests
