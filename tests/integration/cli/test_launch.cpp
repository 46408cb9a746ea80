// `comfy-orch launch` (docs/comfyui.md, "The launcher"): ComfyUI's main.py, by its interpreter,
// in its directory, with its arguments, and comfy-orch in front of comfy-env. The ComfyUI here is
// a main.py that reports what it was given and what it imports.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../unit/manifests/manifest_test_support.hpp"
#include "command_runner.hpp"

namespace {

namespace fs = std::filesystem;
using orch::manifests::testing::temp_dir;
using orch::testing::command_result;

command_result launch(const std::string& args) {
  return orch::testing::run_command("cd / && '" + std::string(COMFY_ORCH_BIN) + "' launch " + args);
}

// A ComfyUI tree whose main.py prints its arguments, directory, and where comfy_env, comfy_orch
// and the host library come from (named, not loaded: a sanitized build's library cannot load
// into an uninstrumented python3; tests/integration/host loads it).
fs::path comfyui_tree(const temp_dir& dir) {
  const fs::path root = dir.path() / "ComfyUI";
  fs::create_directories(root / "custom_nodes");
  std::ofstream(root / "main.py")
      << "import os, sys\n"
         "import comfy_env, comfy_orch.host\n"
         "print('ARGS', ' '.join(sys.argv[1:]))\n"
         "print('CWD', os.getcwd())\n"
         "print('COMFY_ENV', comfy_env.__file__)\n"
         "library = os.environ['ORCH_HOST_LIBRARY']\n"
         "print('HOST_LIBRARY', library, os.path.isfile(library))\n";
  return root;
}

TEST(launch, runs_comfyuis_main_with_its_arguments_and_comfy_orch_in_front_of_comfy_env) {
  temp_dir dir;
  const fs::path root = comfyui_tree(dir);
  const auto r = launch("'" + root.string() + "' --python /usr/bin/python3 -- --cpu --port 8190");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ARGS --cpu --port 8190\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CWD " + fs::canonical(root).string() + "\n"), std::string::npos) << r.out;
  // comfy_env is comfy-orch's compatibility module, and the host library is there.
  EXPECT_NE(r.out.find("COMFY_ENV " + std::string(ORCH_SOURCE_DIR) + "/python/comfy_env/"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("liborch_host.so True\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("comfy-orch launch: /usr/bin/python3 main.py"), std::string::npos) << r.err;
}

TEST(launch, a_venv_in_the_tree_is_comfyuis_interpreter_and_dry_run_says_what_would_run) {
  temp_dir dir;
  const fs::path root = comfyui_tree(dir);
  fs::create_directories(root / "venv/bin");
  fs::create_symlink("/usr/bin/python3", root / "venv/bin/python");
  const auto r = launch("'" + root.string() + "' --dry-run -- --listen");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["argv"][0], (fs::canonical(root) / "venv/bin/python").string());
  EXPECT_EQ(j["argv"][2], "--listen");
  EXPECT_EQ(j["environment"]["PYTHONPATH"].get<std::string>().rfind(
                std::string(ORCH_SOURCE_DIR) + "/python", 0),
            0u);
  EXPECT_TRUE(fs::is_regular_file(j["environment"]["ORCH_HOST_LIBRARY"].get<std::string>()));
}

TEST(launch, help_says_what_it_starts_and_where_comfyuis_arguments_go) {
  const auto r = launch("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--python"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--dry-run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Arguments after -- go to ComfyUI"), std::string::npos) << r.out;
}

TEST(launch, what_is_not_a_comfyui_tree_or_an_interpreter_is_refused_with_the_fix) {
  temp_dir dir;
  auto r = launch("'" + dir.path().string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a ComfyUI tree (it has no main.py)"), std::string::npos) << r.err;
  const fs::path root = comfyui_tree(dir);
  r = launch("'" + root.string() + "' --python /nonexistent/python");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give ComfyUI's with --python"), std::string::npos) << r.err;
}

}  // namespace
