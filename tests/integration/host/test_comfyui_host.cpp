// comfy_orch.comfyui in a ComfyUI-like process (docs/comfyui.md): packs written for comfy-env,
// loaded the way ComfyUI loads custom nodes (comfyui/loader_harness.py), their isolated envs run
// by real workers through liborch_host.so. The assertions are in comfyui_from_python.py; this
// test gives it a deployment and a fresh tree, and reads its verdict.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

std::string test_python() {
  const char* chosen = std::getenv("ORCH_TEST_PYTHON");
  return chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3";
}

TEST(comfyui_host, packs_written_for_comfy_env_run_isolated_inside_a_comfyui_process) {
#ifdef ORCH_TEST_SANITIZED
  GTEST_SKIP() << "a sanitized liborch_host.so cannot load into an uninstrumented python3";
#endif
  if (std::system((test_python() + " -c 'import numpy, torch' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << test_python() << " lacks numpy or torch (apt-get install python3-numpy "
                 << "python3-torch)";
  char pattern[] = "/tmp/orch-comfyui-host-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  fs::create_directories(dir / "ComfyUI");
  fs::create_directories(dir / "envs");
  fs::copy(fs::path(ORCH_TEST_COMFYUI_PACKS), dir / "ComfyUI/custom_nodes",
           fs::copy_options::recursive);
  // Packs A and B run in this interpreter; C's env is never built, so it falls back in-process.
  const fs::path deployment = dir / "deployment.toml";
  std::ofstream(deployment) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"1GiB\"\n"
                            << "[plugins]\nsearch_paths = [\"" << ORCH_TEST_PLUGIN_DIR << "\"]\n"
                            << "[comfyui]\nroot = \"" << ORCH_TEST_COMFYUI << "\"\n"
                            << "[env]\nroot = \"" << (dir / "envs").string() << "\"\n"
                            << "[packs]\ncustom_nodes = \""
                            << (dir / "ComfyUI/custom_nodes").string()
                            << "\"\n[packs.python]\n\"orchdemoa-nodes\" = \"" << test_python()
                            << "\"\n\"orchdemob-filters\" = \"" << test_python() << "\"\n"
                            << "[workers]\nhandshake_timeout = \"30s\"\n"
                            << "[shm]\npinned_pool_size = \"64MiB\"\n";
  const std::string command =
      "cd '" + dir.string() + "' && COMFY_ORCH_DEPLOYMENT='" + deployment.string() +
      "' ORCH_HOST_LIBRARY='" + ORCH_TEST_HOST_LIBRARY + "' ORCH_WORKER_EXECUTABLE='" +
      ORCH_TEST_WORKER + "' ORCH_LOG_LEVEL=warn PYTHONDONTWRITEBYTECODE=1 PYTHONPATH='" +
      ORCH_TEST_PYTHON_PACKAGE + ":" + ORCH_TEST_COMFYUI + "' " + test_python() + " '" +
      ORCH_TEST_COMFYUI_SCRIPT + "' '" + (dir / "ComfyUI/custom_nodes").string() +
      "' > python.log 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream log(dir / "python.log");
  const std::string output((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("\nOK"), std::string::npos) << output;
  std::error_code ec;
  if (rc == 0) fs::remove_all(dir, ec);
}

}  // namespace
