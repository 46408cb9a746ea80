// comfy_orch.comfyui in a ComfyUI-like process (docs/comfyui.md): packs written for comfy-env,
// loaded the way ComfyUI loads custom nodes (comfyui/loader_harness.py), their isolated envs run
// by real workers through liborch_host.so. The assertions are in comfyui_from_python.py; this
// test gives it a deployment and a fresh tree, and reads its verdict.
#include <stdlib.h>

#include <cstdlib>

#include <algorithm>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// `conventions`, for the fixture tree only: the ComfyUI whose conventions it follows
// (comfy_api/latest/_io.py: "0.8" by default, or "0.3.64" for a125cd84's).
void run_in_comfyui(const char* script, const std::string& conventions = "0.8") {
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
  // Its temporary files go in a directory of the test's own, which must be empty at the end.
  fs::create_directories(dir / "tmp");
  const auto r = orch::host_testing::run_script(
      dir,
      "TMPDIR='" + (dir / "tmp").string() + "' ORCH_TEST_COMFYUI_CONVENTIONS=" + conventions +
          " COMFY_ORCH_DEPLOYMENT='" +
          deployment.string() + "' ORCH_CLI='" + COMFY_ORCH_BIN +
          "' PYTHONPATH='" +
          ORCH_TEST_PYTHON_PACKAGE + ":" + comfyui_tree() + "'",
      script, (dir / "ComfyUI/custom_nodes").string());
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("\nOK"), std::string::npos) << r.output;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir / "tmp")) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << testing::PrintToString(left);
  std::error_code ec;
  if (r.rc == 0 && left.empty()) fs::remove_all(dir, ec);
}

TEST(comfyui_host, packs_written_for_comfy_env_run_isolated_inside_a_comfyui_process) {
  run_in_comfyui(ORCH_TEST_COMFYUI_SCRIPT);
}

// The same packs on the fixture following ComfyUI a125cd84 (0.3.64) where 0.8 differs: its V3
// PREPARE_CLASS_CLONE takes the hidden values, and it has no dynamic inputs. A real tree follows
// its own (ORCH_COMFYUI_ROOT), so this runs on the fixture only.
TEST(comfyui_host, packs_run_on_a_comfyui_with_0_3_64s_conventions) {
  if (std::getenv("ORCH_COMFYUI_ROOT") != nullptr && *std::getenv("ORCH_COMFYUI_ROOT") != '\0')
    GTEST_SKIP() << "a real tree has its own conventions: the fixture's 0.3.64 mode is not used";
  run_in_comfyui(ORCH_TEST_COMFYUI_SCRIPT, "0.3.64");
}

// Worker models as stand-ins in ComfyUI's current_loaded_models, evicted by its free_memory with
// receipts, a worker killed inside that loop, ComfyUI's pinning in the one budget, and the
// host's settings from ComfyUI's arguments.
TEST(comfyui_host, comfyuis_memory_manager_reaches_worker_models_and_the_pinned_budget) {
  run_in_comfyui(ORCH_TEST_COMFYUI_MEMORY_SCRIPT);
}

// The two isolated envs of the launch tests, built where comfy-env puts them
// (ORCH_ENV_ROOT/envs/<env>); C's and B's blender/ are left unbuilt, so C falls back in-process
// and blender/ fails there alone.
// Each sees what the test interpreter sees, its .pth files included (a .pth that adds its
// site-packages with site.addsitedir): where that interpreter is itself a venv, as a real tree's
// is, --system-site-packages reaches only its base's.
void build_launch_envs(const fs::path& env_root) {
  for (const char* env : {"orchdemoa-nodes", "orchdemob-filters"}) {
    const std::string venv = (env_root / "envs" / env).string();
    ASSERT_EQ(std::system((test_python() + " -m venv --system-site-packages --without-pip '" +
                           venv + "' && '" + test_python() +
                           "' -c 'import site; print(\"import site; \" + \"; \".join("
                           "\"site.addsitedir(%r)\" % d for d in site.getsitepackages()))' | '" +
                           venv +
                           "/bin/python' -c 'import site, sys; open(site.getsitepackages()[0] + "
                           "\"/orch_test_python.pth\", \"w\").write(sys.stdin.read())'")
                              .c_str()),
              0);
  }
}

// What `launch` says of the tree in both launch tests: the envs it found, and a fix line that
// names the tree, which `comfy-orch install` takes.
void expect_launch_report(const std::string& log, const fs::path& tree) {
  EXPECT_NE(log.find("[comfy-orch] active: 2 envs isolated, 2 not (ComfyUI tree"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("`comfy-orch install " + tree.string() + " orchdemoc-nodes`"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("(ComfyUI host)"), std::string::npos) << log;
}

// The launch test on a real tree (ORCH_COMFYUI_ROOT): its own main.py serves, and prompts go
// through its HTTP API, its validation and its executor (launch_real_comfyui.py).
void launch_a_real_tree(const fs::path& dir, const fs::path& real) {
  const fs::path tree = dir / "ComfyUI";
  fs::create_directories(tree);
  for (const auto& entry : fs::directory_iterator(real)) {
    const std::string name = entry.path().filename().string();
    if (name == "custom_nodes" || name == "user" || name == "output" || name == "input" ||
        name == "temp" || name == "models" || name == "venv")
      continue;
    fs::create_symlink(entry.path(), tree / name);
  }
  fs::copy(fs::path(ORCH_TEST_COMFYUI_PACKS), tree / "custom_nodes", fs::copy_options::recursive);
  build_launch_envs(dir / "envs");
  const fs::path log_path = dir / "launch.log";
  const auto r = orch::host_testing::run_script(
      dir, "", ORCH_TEST_LAUNCH_REAL_SCRIPT,
      std::string(COMFY_ORCH_BIN) + "' '" + tree.string() + "' '" + test_python() + "' '" +
          (dir / "envs").string() + "' '" + log_path.string());
  std::ifstream log_file(log_path);
  const std::string log((std::istreambuf_iterator<char>(log_file)), {});
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto at = r.output.find("RESULT ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const auto result =
      nlohmann::json::parse(r.output.substr(at + 7, r.output.find('\n', at) - at - 7));
  for (const char* name : {"DemoGradient", "DemoInvert", "DemoV3Gain", "DemoMean"})
    EXPECT_NE(std::find(result["classes"].begin(), result["classes"].end(), name),
              result["classes"].end())
        << name << ": " << log;
  EXPECT_EQ(result["gain_info"]["display_name"], "Demo Gain (V3)") << log;
  // Gradient (env A) -> Invert (env B) -> Viewer (env A), its ui in ComfyUI's history.
  EXPECT_EQ(result["viewer_ui"]["text"], nlohmann::json::array({"8x4"})) << r.output;
  if (result.contains("adjust_ui")) {  // a tree with dynamic inputs (0.8)
    EXPECT_EQ(result["adjust_ui"]["op"],
              nlohmann::json::array({"['factor', 'op'] scale on node 2"}))
        << r.output;
  }
  expect_launch_report(log, tree);
}

// What a user does: `comfy-orch launch <ComfyUI>` over packs written for comfy-env, with no
// deployment file and nothing set but where the envs are. On the fixture, its main.py loads the
// custom nodes as ComfyUI does (the loader harness) and runs a prompt across two isolated envs
// and ComfyUI's own process; on a real tree (ORCH_COMFYUI_ROOT), the tree's own main.py serves
// and is driven over HTTP. The host starts from the tree's description, finding its plugins
// beside the library.
TEST(comfyui_host, comfy_orch_launch_runs_packs_written_for_comfy_env_with_no_deployment_file) {
  if (const auto why = orch::host_testing::python_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  char pattern[] = "/tmp/orch-comfyui-launch-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  if (const char* real = std::getenv("ORCH_COMFYUI_ROOT"); real != nullptr && *real != '\0') {
    launch_a_real_tree(dir, real);
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(dir, ec);
    return;
  }
  const fs::path tree = dir / "ComfyUI";
  fs::create_directories(tree);
  fs::copy(fs::path(ORCH_TEST_COMFYUI), tree, fs::copy_options::recursive);  // main.py replaced
  fs::copy(fs::path(ORCH_TEST_COMFYUI_PACKS), tree / "custom_nodes", fs::copy_options::recursive);
  fs::copy_file(fs::path(ORCH_TEST_COMFYUI_PACKS).parent_path() / "loader_harness.py",
                tree / "loader_harness.py");
  std::ofstream(tree / "main.py")
      << "import json, logging, os, sys\n"
         "logging.basicConfig(level=logging.INFO)  # ComfyUI logs at INFO\n"
         "import comfy.options\n"
         "comfy.options.enable_args_parsing()  # as ComfyUI's main.py, before cli_args\n"
         "import utils.extra_config  # then its utils package, as main.py does\n"
         "import comfy.cli_args, comfy.model_management, comfy.model_patcher, comfy.utils\n"
         "import loader_harness\n"
         "here = os.path.dirname(os.path.abspath(__file__))\n"
         "classes, _, failed = loader_harness.load_custom_nodes(os.path.join(here, 'custom_nodes'))\n"
         "assert not failed, failed\n"
         "out = loader_harness.execute({\n"
         "    '1': {'class_type': 'DemoGradient', 'inputs': {'width': 8, 'height': 4}},\n"
         "    '2': {'class_type': 'DemoInvert', 'inputs': {'image': ['1', 0]}},\n"
         "    '3': {'class_type': 'DemoMean', 'inputs': {'image': ['2', 0]}}}, classes)\n"
         "print('RESULT ' + json.dumps({'isolated': sorted(n for n, c in classes.items()\n"
         "                                                 if hasattr(c, 'COMFY_ORCH_ENV')),\n"
         "                              'mean': out['3'][0][0], 'mean_pid': out['3'][1][0],\n"
         "                              'invert_pid': out['2'][1][0], 'pid': os.getpid()}))\n";
  build_launch_envs(dir / "envs");
  const std::string command = "cd / && ORCH_ENV_ROOT='" + (dir / "envs").string() + "' '" +
                              COMFY_ORCH_BIN + "' launch '" + tree.string() + "' --python '" +
                              test_python() + "' -- --cpu > '" + (dir / "launch.log").string() +
                              "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log_file(dir / "launch.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)), {});
  ASSERT_EQ(status, 0) << log;
  const auto at = log.find("RESULT ");
  ASSERT_NE(at, std::string::npos) << log;
  const auto result = nlohmann::json::parse(log.substr(at + 7, log.find('\n', at) - at - 7));
  for (const char* name : {"DemoGradient", "DemoInvert", "DemoV3Gain"})
    EXPECT_NE(std::find(result["isolated"].begin(), result["isolated"].end(), name),
              result["isolated"].end())
        << name << ": " << log;
  EXPECT_NEAR(result["mean"].get<double>(), 0.5, 1e-5) << log;
  EXPECT_EQ(result["mean_pid"], result["pid"]) << log;     // C ran in ComfyUI's process
  EXPECT_NE(result["invert_pid"], result["pid"]) << log;   // B in its worker
  expect_launch_report(log, tree);
  // The fixture has the whole surface the canary checks (a real tree may lack a member: an
  // older one has no MAX_PINNED_MEMORY, and the canary says that feature is off).
  EXPECT_EQ(log.find("lacks"), std::string::npos) << log;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
