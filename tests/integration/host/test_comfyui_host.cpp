// comfy_orch.comfyui in a ComfyUI-like process (docs/comfyui.md): packs written for comfy-env,
// loaded the way ComfyUI loads custom nodes (comfyui/loader_harness.py), their isolated envs run
// by real workers through liborch_host.so. The assertions are in comfyui_from_python.py; this
// test gives it a deployment and a fresh tree, and reads its verdict.
#include <stdlib.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "python_script.hpp"

namespace {

namespace fs = std::filesystem;
using orch::host_testing::test_python;

// Runs `script` in a fresh ComfyUI-like tree over the demo packs: A and B run in this
// interpreter; C's env is never built, so it falls back in-process. Returns its verdict.
// The ComfyUI tree: a real checkout named by ORCH_COMFYUI_ROOT (docs/comfyui.md, "Tests"), else
// the fixture.
std::string comfyui_tree() {
  const char* real = std::getenv("ORCH_COMFYUI_ROOT");
  return real != nullptr && *real != '\0' ? real : ORCH_TEST_COMFYUI;
}

void run_in_comfyui(const char* script) {
  if (const auto why = orch::host_testing::python_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(fs::is_directory(fs::path(comfyui_tree()) / "comfy"))
      << "ORCH_COMFYUI_ROOT=" << comfyui_tree()
      << " is not a ComfyUI checkout (no comfy/ directory): name the directory holding main.py";
  char pattern[] = "/tmp/orch-comfyui-host-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  fs::create_directories(dir / "ComfyUI");
  fs::create_directories(dir / "envs");
  fs::copy(fs::path(ORCH_TEST_COMFYUI_PACKS), dir / "ComfyUI/custom_nodes",
           fs::copy_options::recursive);
  const fs::path deployment = dir / "deployment.toml";
  std::ofstream(deployment) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"1GiB\"\n"
                            << "[plugins]\nsearch_paths = [\"" << ORCH_TEST_PLUGIN_DIR << "\"]\n"
                            << "[comfyui]\nroot = \"" << comfyui_tree() << "\"\n"
                            << "[env]\nroot = \"" << (dir / "envs").string() << "\"\n"
                            << "[packs]\ncustom_nodes = \""
                            << (dir / "ComfyUI/custom_nodes").string()
                            << "\"\n[packs.python]\n\"orchdemoa-nodes\" = \"" << test_python()
                            << "\"\n\"orchdemob-filters\" = \"" << test_python() << "\"\n"
                            << "[workers]\nhandshake_timeout = \"30s\"\nrestart_backoff = \"50ms\"\n"
                            << "[shm]\npinned_pool_size = \"64MiB\"\n";
  const auto r = orch::host_testing::run_script(
      dir,
      "COMFY_ORCH_DEPLOYMENT='" + deployment.string() + "' PYTHONPATH='" +
          ORCH_TEST_PYTHON_PACKAGE + ":" + comfyui_tree() + "'",
      script, (dir / "ComfyUI/custom_nodes").string());
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("\nOK"), std::string::npos) << r.output;
  std::error_code ec;
  if (r.rc == 0) fs::remove_all(dir, ec);
}

TEST(comfyui_host, packs_written_for_comfy_env_run_isolated_inside_a_comfyui_process) {
  run_in_comfyui(ORCH_TEST_COMFYUI_SCRIPT);
}

// Worker models as stand-ins in ComfyUI's current_loaded_models, evicted by its free_memory with
// receipts, a worker killed inside that loop, ComfyUI's pinning in the one budget, and the
// host's settings from ComfyUI's arguments.
TEST(comfyui_host, comfyuis_memory_manager_reaches_worker_models_and_the_pinned_budget) {
  run_in_comfyui(ORCH_TEST_COMFYUI_MEMORY_SCRIPT);
}

}  // namespace
