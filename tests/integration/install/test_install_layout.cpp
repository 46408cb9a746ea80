// install_layout: the host finds its worker, plugins and node libraries from where its own
// executable is, in an installed prefix or in a build tree anywhere (docs/deployment.md,
// "Install and relocation"). Fake trees in a temporary directory; nothing is run.
#include "orch/process/install_layout.hpp"

#include <gtest/gtest.h>

#include "../../unit/manifests/manifest_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using orch::manifests::testing::temp_dir;
using orch::process::locate_install_layout;

// ORCH_INSTALL_*: the prefix-relative directories of cmake/InstallLayout.cmake.
TEST(install_layout, a_host_in_an_installed_prefix_finds_the_files_installed_beside_it) {
  temp_dir prefix;
  const fs::path bin = prefix.path() / ORCH_INSTALL_BINDIR;
  prefix.write(fs::path(ORCH_INSTALL_BINDIR) / "comfy-orch-worker", "");
  const auto layout = locate_install_layout(bin / "comfy-orch");
  EXPECT_EQ(layout.worker_executable, bin / "comfy-orch-worker");
  EXPECT_EQ(layout.plugin_directory, prefix.path() / ORCH_INSTALL_PLUGIN_DIR);
  EXPECT_EQ(layout.node_library_directory, prefix.path() / ORCH_INSTALL_NODE_DIR);
  EXPECT_EQ(layout.templates_directory, prefix.path() / ORCH_INSTALL_TEMPLATES_DIR);
}

TEST(install_layout, a_host_in_a_build_tree_finds_the_worker_plugins_and_packs_built_with_it) {
  temp_dir build;
  build.write("worker/comfy-orch-worker", "");
  const auto layout = locate_install_layout(build.path() / "orchestrator" / "comfy-orch");
  EXPECT_EQ(layout.worker_executable, build.path() / "worker" / "comfy-orch-worker");
  EXPECT_EQ(layout.plugin_directory, build.path() / "plugins" / "lib");
  EXPECT_EQ(layout.node_library_directory, build.path() / "examples");
}

TEST(install_layout, a_moved_prefix_is_found_where_it_is_now) {
  temp_dir tmp;
  tmp.write(fs::path("first") / ORCH_INSTALL_BINDIR / "comfy-orch-worker", "");
  fs::rename(tmp.path() / "first", tmp.path() / "second");
  const auto layout =
      locate_install_layout(tmp.path() / "second" / ORCH_INSTALL_BINDIR / "comfy-orch");
  EXPECT_EQ(layout.worker_executable,
            tmp.path() / "second" / ORCH_INSTALL_BINDIR / "comfy-orch-worker");
  EXPECT_EQ(layout.plugin_directory, tmp.path() / "second" / ORCH_INSTALL_PLUGIN_DIR);
}

TEST(install_layout, with_no_worker_beside_the_host_the_installed_paths_are_named) {
  temp_dir prefix;
  const fs::path bin = prefix.path() / ORCH_INSTALL_BINDIR;
  const auto layout = locate_install_layout(bin / "comfy-orch");
  EXPECT_EQ(layout.worker_executable, bin / "comfy-orch-worker");
  EXPECT_EQ(layout.plugin_directory, prefix.path() / ORCH_INSTALL_PLUGIN_DIR);
}

TEST(install_layout, a_directory_named_like_the_worker_is_not_the_worker) {
  temp_dir build;
  fs::create_directories(build.path() / "orchestrator" / "comfy-orch-worker");
  build.write("worker/comfy-orch-worker", "");
  const auto layout = locate_install_layout(build.path() / "orchestrator" / "comfy-orch");
  EXPECT_EQ(layout.worker_executable, build.path() / "worker" / "comfy-orch-worker");
}

}  // namespace
