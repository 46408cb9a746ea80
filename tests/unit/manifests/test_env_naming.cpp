// The env naming rule of comfy-env 507d341, with every example pair of
// comfy-env's tests and further pairs computed with its function (docs/references.md,
// comfy-env §1.4).
#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_naming.hpp"

namespace orch::manifests {
namespace {

// Creates <tmp>/<pack>/<relative> and names it; relative "" is a root-level config.
std::string name_of(const std::string& pack, const std::string& relative) {
  testing::temp_dir tmp;
  const auto pack_dir = tmp.path() / pack;
  const auto config_dir = relative.empty() ? pack_dir : pack_dir / relative;
  std::filesystem::create_directories(config_dir);
  return env_name(pack_dir, config_dir);
}

TEST(env_naming, comfy_env_test_pairs) {
  EXPECT_EQ(name_of("ComfyUI-SAM3", ""), "sam3");
  EXPECT_EQ(name_of("comfyui-motioncapture", "nodes"), "motioncapture-nodes");
  EXPECT_EQ(name_of("ComfyUI-Foo", ""), "foo");
  EXPECT_EQ(name_of("ComfyUI_Foo", ""), "foo");
  EXPECT_EQ(name_of("comfyui-foo", ""), "foo");
  EXPECT_EQ(name_of("comfyui_foo", ""), "foo");
  EXPECT_EQ(name_of("NotComfy", ""), "notcomfy");
  const auto disabled = name_of("ComfyUI-Foo._disabled (copy)", "");
  EXPECT_EQ(disabled, "foo-disabled-copy");
  for (char c : disabled) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
}

TEST(env_naming, further_examples) {
  EXPECT_EQ(name_of("ComfyUI-3D-Pack-env", "nodes"), "3d-pack-env-nodes");
  EXPECT_EQ(name_of("ComfyUI-SkinTokens_env", "nodes"), "skintokens-env-nodes");
  EXPECT_EQ(name_of("ComfyuiDevelopement", "nodes"), "comfyuidevelopement-nodes");
  EXPECT_EQ(name_of("sam3d-body-comfyUI-camshottoolkit", "nodes"),
            "sam3d-body-comfyui-camshottoolkit-nodes");
  EXPECT_EQ(name_of("ComfyUI-MotionCapture", "nodes/nodes_gpu"), "motioncapture-nodes-gpu");
  EXPECT_EQ(name_of("ComfyUI-GeometryPack", "nodes/main"), "geometrypack-main");
  EXPECT_EQ(name_of("COMFYUI-Foo", ""), "comfyui-foo");
  EXPECT_EQ(name_of("Comfyui-Foo", "nodes"), "comfyui-foo-nodes");
  EXPECT_EQ(name_of("ComfyUI-ComfyUI-Foo", ""), "comfyui-foo");
  EXPECT_EQ(name_of("ComfyUI-", "nodes"), "nodes");
  EXPECT_EQ(name_of("ComfyUI-D\xC3\xA9j\xC3\xA0 vu", "nodes/Sub Dir.v2"), "d-j-vu-sub-dir-v2");
  EXPECT_EQ(name_of("ComfyUI-x", "nodes/___"), "x");
}

TEST(env_naming, only_the_last_component_of_the_config_dir_counts) {
  EXPECT_EQ(name_of("ComfyUI-P", "nodes/gpu"), "p-gpu");
  EXPECT_EQ(name_of("ComfyUI-P", "a/b/c"), "p-c");
}

TEST(env_naming, different_inputs_can_collide) {
  EXPECT_EQ(name_of("ComfyUI-Foo", ""), name_of("comfyui_foo", ""));
  EXPECT_EQ(name_of("Foo_Bar", ""), name_of("foo-bar", ""));
  EXPECT_EQ(name_of("ComfyUI-X", "nodes"), name_of("ComfyUI-X", "nodes/nodes"));
}

TEST(env_naming, config_outside_the_pack_uses_its_own_directory_name) {
  testing::temp_dir tmp;
  std::filesystem::create_directories(tmp.path() / "ComfyUI-A");
  std::filesystem::create_directories(tmp.path() / "elsewhere" / "Extra_Dir");
  EXPECT_EQ(env_name(tmp.path() / "ComfyUI-A", tmp.path() / "elsewhere" / "Extra_Dir"),
            "a-extra-dir");
}

TEST(env_naming, pack_name_is_taken_as_given_but_root_check_resolves_symlinks) {
  testing::temp_dir tmp;
  std::filesystem::create_directories(tmp.path() / "real-pack");
  std::filesystem::create_directory_symlink(tmp.path() / "real-pack", tmp.path() / "ComfyUI-Link");
  EXPECT_EQ(env_name(tmp.path() / "ComfyUI-Link", tmp.path() / "real-pack"), "link");
}

TEST(env_naming, sanitize_follows_python_lower_for_kelvin_sign) {
  EXPECT_EQ(sanitize_env_part("\xE2\x84\xAA"
                              "elvin"),
            "kelvin");
  EXPECT_EQ(sanitize_env_part("--A__b--"), "a-b");
  EXPECT_EQ(sanitize_env_part("___"), "");
}

TEST(env_naming, prefix_strip_is_case_sensitive_and_once) {
  EXPECT_EQ(strip_comfyui_prefix("ComfyUI-Foo"), "Foo");
  EXPECT_EQ(strip_comfyui_prefix("comfyUI_Foo"), "comfyUI_Foo");
  EXPECT_EQ(strip_comfyui_prefix("ComfyUI-ComfyUI-Foo"), "ComfyUI-Foo");
}

}  // namespace
}  // namespace orch::manifests
