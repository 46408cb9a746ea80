// extension_web_dirs: a pack's web directory found as ComfyUI's load_custom_node registers it,
// without running the pack, and served under /extensions/<name>/ by frontend_files.
#include "orch/serve/extension_web_dirs.hpp"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "orch/serve/frontend_files.hpp"
#include "temp_tree.hpp"

namespace {

using orch::serve::extension_web_dirs_of;
using orch::serve::frontend_files;
using orch::testing::read_fd;
using orch::testing::temp_tree;

TEST(extension_web_dirs, a_string_web_directory_in_the_packs_init_names_it_by_its_directory) {
  temp_tree t;
  t.file("Pack-A/__init__.py",
         "from comfy_env import register_nodes\n"
         "NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()\n"
         "WEB_DIRECTORY = \"./web\"  # the viewer's scripts\n");
  t.file("Pack-A/web/js/viewer.js", "x");
  const auto web = extension_web_dirs_of(t / "Pack-A", "Pack-A");
  ASSERT_EQ(web.size(), 1u);
  EXPECT_EQ(web[0].name, "Pack-A");
  EXPECT_EQ(web[0].dir, std::filesystem::canonical(t / "Pack-A/web"));
}

// ComfyUI's load_custom_node registers both, each under its own name.
TEST(extension_web_dirs, pyprojects_tool_comfy_web_is_named_by_the_project_beside_init_s) {
  temp_tree t;
  t.file("pack/pyproject.toml",
         "[project]\nname = \"comfyui-viewer\"\n\n[tool.comfy]\nweb = \"js\"\n");
  t.file("pack/__init__.py", "WEB_DIRECTORY = 'web'\n");
  t.dir("pack/js");
  t.dir("pack/web");
  const auto web = extension_web_dirs_of(t / "pack", "pack");
  ASSERT_EQ(web.size(), 2u);
  EXPECT_EQ(web[0].name, "comfyui-viewer");
  EXPECT_EQ(web[0].dir.filename(), "js");
  EXPECT_EQ(web[1].name, "pack");
  EXPECT_EQ(web[1].dir.filename(), "web");
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
    EXPECT_TRUE(extension_web_dirs_of(t / "p", "p").empty()) << init;
  }
  t.file("q/pyproject.toml", "not [valid toml");
  EXPECT_TRUE(extension_web_dirs_of(t / "q", "q").empty());
}

// A link out of the pack publishes nothing, whether it is the web directory or a directory on
// the way to it; an __init__.py that is a link or a FIFO is never read (nor waited on).
TEST(extension_web_dirs, a_symlink_out_of_the_pack_or_a_fifo_declares_nothing) {
  temp_tree t;
  t.file("home/secret.txt", "secret");
  t.symlink(t / "home", "p/web");
  t.file("p/__init__.py", "WEB_DIRECTORY = \"./web\"\n");
  EXPECT_TRUE(extension_web_dirs_of(t / "p", "p").empty());
  t.symlink(t / "home", "q/a");
  t.file("q/__init__.py", "WEB_DIRECTORY = \"a/web\"\n");
  t.dir("home/web");
  EXPECT_TRUE(extension_web_dirs_of(t / "q", "q").empty());
  t.file("r/real_init.py", "WEB_DIRECTORY = \"web\"\n");
  t.dir("r/web");
  t.symlink(t / "r/real_init.py", "r/__init__.py");
  EXPECT_TRUE(extension_web_dirs_of(t / "r", "r").empty());
  t.dir("s/web");
  ASSERT_EQ(::mkfifo((t / "s/__init__.py").c_str(), 0600), 0);
  EXPECT_TRUE(extension_web_dirs_of(t / "s", "s").empty());
}

TEST(extension_web_dirs, a_packs_scripts_are_listed_and_served_under_its_name) {
  temp_tree t;
  t.file("front/index.html", "i");
  t.file("front/extensions/core/a.js", "core");
  t.file("Pack A/web/js/viewer.js", "viewer()");
  t.file("Pack A/web/js/style.css", "s");
  t.file("Pack A/__init__.py", "WEB_DIRECTORY = './web'\n");
  const frontend_files files(t / "front", extension_web_dirs_of(t / "Pack A", "Pack A"));
  EXPECT_EQ(files.extensions(),
            nlohmann::json({"/extensions/core/a.js", "/extensions/Pack%20A/js/viewer.js"}));
  const auto script = files.get("/extensions/Pack A/js/viewer.js");
  ASSERT_TRUE(script.has_value());
  EXPECT_EQ(read_fd(script->file->get()), "viewer()");
  EXPECT_EQ(script->content_type, "application/javascript; charset=utf-8");
  EXPECT_FALSE(files.get("/extensions/Pack A/../../front/index.html").has_value());
  EXPECT_FALSE(files.get("/extensions/Other/js/viewer.js").has_value());
}

// Issue 55: a pack's web directory replaced by a symlink to / while serve ran (the pack's worker
// can do it) served /etc/passwd: the directory found at the start was resolved again by name at
// each request. It is served only while it is that directory.
TEST(extension_web_dirs, a_web_directory_swapped_for_a_symlink_is_no_longer_served) {
  temp_tree t;
  t.file("front/index.html", "i");
  t.file("Pack/web/viewer.js", "viewer()");
  t.file("Pack/__init__.py", "WEB_DIRECTORY = 'web'\n");
  const frontend_files files(t / "front", extension_web_dirs_of(t / "Pack", "Pack"));
  ASSERT_TRUE(files.get("/extensions/Pack/viewer.js").has_value());
  std::filesystem::rename(t / "Pack/web", t / "Pack/web.old");
  std::filesystem::create_directory_symlink("/", t / "Pack/web");
  EXPECT_FALSE(files.get("/extensions/Pack/etc/passwd").has_value());
  EXPECT_EQ(files.extensions(), nlohmann::json::array());
  // A directory put back in its place is another directory: not served either.
  std::filesystem::remove(t / "Pack/web");
  std::filesystem::create_directory(t / "Pack/web");
  t.file("Pack/web/viewer.js", "other()");
  EXPECT_FALSE(files.get("/extensions/Pack/viewer.js").has_value());
}

}  // namespace
