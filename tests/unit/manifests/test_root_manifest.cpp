// comfy-env-root.toml: both eras, and legacy sections accepted with a warning saying what
// comfy-orch does with each.
#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/root_manifest.hpp"
#include "orch/manifests/toml_source.hpp"

namespace orch::manifests {
namespace {

using testing::find;

struct parsed_root {
  root_manifest manifest;
  diagnostics diags;
};

parsed_root parse_root(const std::string& text) {
  parsed_root p;
  auto table = parse_toml_text(text, "comfy-env-root.toml", p.diags);
  if (table) p.manifest = parse_root_manifest(*table, "comfy-env-root.toml", p.diags);
  return p;
}

TEST(root_manifest, node_reqs_era_with_settings_and_types) {
  auto p = parse_root(
      "[node_reqs]\nComfyUI-KJNodes = \"kijai/ComfyUI-KJNodes\"\n"
      "Pinned = { github = \"o/r\", tag = \"v1\" }\n"
      "[settings]\nisolate = true\nworker_vram_budget = 2\n"
      "[types]\nTRIMESH = \"custom\"\nIMAGE = \"builtin\"\n");
  EXPECT_TRUE(p.diags.items().empty()) << testing::dump(p.diags);
  ASSERT_EQ(p.manifest.requirements.size(), 2u);
  EXPECT_EQ(p.manifest.requirements[0].source, "kijai/ComfyUI-KJNodes");
  EXPECT_EQ(p.manifest.requirements[0].section, "node_reqs");
  EXPECT_EQ(p.manifest.requirements[1].fields.at("tag"), "v1");
  EXPECT_EQ(p.manifest.settings, (std::vector<std::pair<std::string, std::string>>{
                                     {"isolate", "1"}, {"worker_vram_budget", "2"}}));
  EXPECT_EQ(p.manifest.types.at("TRIMESH"), socket_kind::custom);
  EXPECT_EQ(p.manifest.types.at("IMAGE"), socket_kind::builtin);
}

TEST(root_manifest, node_packs_era_is_read) {
  auto p =
      parse_root("[node_packs]\n"
                 "ComfyUI-MoGe2 = { registry = \"comfyui-moge2\", version = \"1.2\" }\n");
  EXPECT_FALSE(p.diags.has_errors());
  ASSERT_EQ(p.manifest.requirements.size(), 1u);
  EXPECT_EQ(p.manifest.requirements[0].section, "node_packs");
  EXPECT_EQ(p.manifest.requirements[0].fields.at("registry"), "comfyui-moge2");
}

TEST(root_manifest, legacy_sections_warn_with_line_and_are_ignored) {
  auto p = parse_root(
      "[apt]\npackages = [\"x\"]\n[cuda]\npackages = [\"y\"]\n[dependencies]\nz = \"*\"\n"
      "[pypi-dependencies]\nw = \"*\"\n[target.linux-64.dependencies]\nv = \"*\"\n"
      "[python]\nversion = \"3.11\"\n[nodes]\nA = \"b\"\n[brew]\npackages = []\n");
  EXPECT_FALSE(p.diags.has_errors());
  unsigned line = 1;
  for (const char* key : {"[apt]", "[cuda]", "[dependencies]", "[pypi-dependencies]", "[target]",
                          "[python]", "[nodes]", "[brew]"}) {
    const auto* w = find(p.diags, key, severity::warning);
    ASSERT_NE(w, nullptr) << key;
    EXPECT_EQ(w->where.line, line) << key;
    EXPECT_NE(w->message.find("ignores"), std::string::npos) << key;
    line += 2;
  }
}

TEST(root_manifest, legacy_env_vars_are_applied_with_a_warning) {
  auto p = parse_root("[env_vars]\nOMP_NUM_THREADS = 4\n");
  EXPECT_FALSE(p.diags.has_errors());
  const auto* w = find(p.diags, "[env_vars]", severity::warning);
  ASSERT_NE(w, nullptr);
  EXPECT_NE(w->message.find("applies"), std::string::npos);
  EXPECT_EQ(p.manifest.legacy_env_vars,
            (std::vector<std::pair<std::string, std::string>>{{"OMP_NUM_THREADS", "4"}}));
}

TEST(root_manifest, unknown_settings_key_warns) {
  auto p = parse_root("[settings]\nturbo = true\n");
  EXPECT_FALSE(p.diags.has_errors());
  const auto* w = find(p.diags, "settings.turbo", severity::warning);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->where.line, 2u);
}

TEST(root_manifest_errors, type_value_outside_the_vocabulary_is_rejected) {
  auto p = parse_root("[types]\nTRIMESH = \"custom\"\nMESH = \"external\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "types.MESH", 3u, 8u);
  EXPECT_EQ(p.manifest.types.size(), 1u);
}

TEST(root_manifest_errors, type_value_that_is_not_a_string_is_rejected) {
  auto p = parse_root("[types]\nMESH = true\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "types.MESH", 2u, 8u);
}

TEST(root_manifest_errors, node_req_of_wrong_type_is_rejected) {
  auto p = parse_root("[node_reqs]\nA = 5\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "node_reqs.A", 2u, 5u);
}

}  // namespace
}  // namespace orch::manifests
