// extension_web_dirs: a pack's web directory found as ComfyUI's load_custom_node registers it,
// without running the pack, and served under /extensions/<name>/ by frontend_files.
#include "orch/serve/extension_web_dirs.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "orch/serve/frontend_files.hpp"
#include "temp_tree.hpp"

namespace {

using orch::orchestrator::extension_web_dir_of;
using orch::orchestrator::frontend_files;
using orch::testing::read_fd;
using orch::testing::temp_tree;

TEST(extension_web_dirs, a_string_web_directory_in_the_packs_init_names_it_by_its_directory) {
  temp_tree t;
  t.file("Pack-A/__init__.py",
         "from comfy_env import register_nodes\n"
         "NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()\n"
         "WEB_DIRECTORY = \"./web\"  # the viewer's scripts\n");
  t.file("Pack-A/web/js/viewer.js", "x");
  const auto web = extension_web_dir_of(t / "Pack-A");
  ASSERT_TRUE(web.has_value());
  EXPECT_EQ(web->name, "Pack-A");
  EXPECT_EQ(web->dir, (t / "Pack-A/web").lexically_normal());
}

TEST(extension_web_dirs, pyprojects_tool_comfy_web_wins_and_is_named_by_the_project) {
  temp_tree t;
  t.file("pack/pyproject.toml",
         "[project]\nname = \"comfyui-viewer\"\n\n[tool.comfy]\nweb = \"js\"\n");
  t.file("pack/__init__.py", "WEB_DIRECTORY = 'web'\n");
  t.dir("pack/js");
  t.dir("pack/web");
  const auto web = extension_web_dir_of(t / "pack");
  ASSERT_TRUE(web.has_value());
  EXPECT_EQ(web->name, "comfyui-viewer");
  EXPECT_EQ(web->dir.filename(), "js");
}

TEST(extension_web_dirs, what_is_computed_absent_or_outside_the_pack_declares_nothing) {
  temp_tree t;
  t.dir("outside");
  for (const char* init : {"WEB_DIRECTORY = os.path.join(HERE, 'web')\n",  // not a literal
                           "WEB_DIRECTORY = \"./missing\"\n",               // no such directory
                           "WEB_DIRECTORY = \"../outside\"\n",              // leaves the pack
                           "    WEB_DIRECTORY = \"web\"\n"}) {              // not top-level
    t.file("p/__init__.py", init);
    t.dir("p/web");
    EXPECT_FALSE(extension_web_dir_of(t / "p").has_value()) << init;
  }
  t.file("q/pyproject.toml", "not [valid toml");
  EXPECT_FALSE(extension_web_dir_of(t / "q").has_value());
}

TEST(extension_web_dirs, a_packs_scripts_are_listed_and_served_under_its_name) {
  temp_tree t;
  t.file("front/index.html", "i");
  t.file("front/extensions/core/a.js", "core");
  t.file("Pack A/web/js/viewer.js", "viewer()");
  t.file("Pack A/web/js/style.css", "s");
  const frontend_files files(t / "front", {{"Pack A", t / "Pack A/web"}});
  EXPECT_EQ(files.extensions(),
            nlohmann::json({"/extensions/core/a.js", "/extensions/Pack%20A/js/viewer.js"}));
  const auto script = files.get("/extensions/Pack A/js/viewer.js");
  ASSERT_TRUE(script.has_value());
  EXPECT_EQ(read_fd(script->file->get()), "viewer()");
  EXPECT_EQ(script->content_type, "application/javascript; charset=utf-8");
  EXPECT_FALSE(files.get("/extensions/Pack A/../../front/index.html").has_value());
  EXPECT_FALSE(files.get("/extensions/Other/js/viewer.js").has_value());
}

}  // namespace
