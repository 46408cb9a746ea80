// How a Python worker is started: its own interpreter in a venv, or through `pixi run` in a pixi
// env for its activation.
#include <gtest/gtest.h>

#include "orch/runtime/python_worker_command.hpp"

namespace orch::runtime {
namespace {

using process::environment;
using process::spawn_request;

supervisor_options worker_options() {
  supervisor_options o;
  o.worker_library = "/opt/orch/liborch_worker.so";
  o.python_package_root = "/opt/orch/python";
  return o;
}

TEST(python_worker_command, a_venv_env_starts_its_own_interpreter) {
  python_worker_spec spec{"/ws/envs/a/bin/python", "/packs/p/nodes", "/packs/p", {}, {}, {}};
  spawn_request request;
  request.args = {"--channel-fd", "3"};
  environment env{{"PYTHONPATH", "/elsewhere"}};
  python_worker_command(spec, worker_options(), request, env);
  EXPECT_EQ(request.executable, "/ws/envs/a/bin/python");
  ASSERT_GE(request.args.size(), 4u);
  EXPECT_EQ(request.args[0], "-s");
  EXPECT_EQ(request.args[1], "-c");
  EXPECT_EQ(request.args[3], "/opt/orch/python");
  EXPECT_EQ(request.args.back(), "3");
  EXPECT_EQ(env.count("PYTHONPATH"), 0u);
  EXPECT_EQ(env["ORCH_WORKER_LIBRARY"], "/opt/orch/liborch_worker.so");
}

TEST(python_worker_command, a_pixi_env_starts_through_pixi_run_for_its_activation) {
  python_worker_spec spec{"/ws/envs/a/.pixi/envs/default/bin/python",
                          "/packs/p/nodes",
                          "/packs/p",
                          {},
                          "/ws/envs/a/pixi.toml",
                          "/usr/local/bin/pixi"};
  spawn_request request;
  environment env;
  python_worker_command(spec, worker_options(), request, env);
  EXPECT_EQ(request.executable, "/usr/local/bin/pixi");
  const std::vector<std::string> head(request.args.begin(), request.args.begin() + 9);
  EXPECT_EQ(head,
            (std::vector<std::string>{"run", "--as-is", "--manifest-path", "/ws/envs/a/pixi.toml",
                                      "-e", "default", "python", "-s", "-c"}));
  EXPECT_EQ(request.working_directory, "/packs/p");
}

}  // namespace
}  // namespace orch::runtime
