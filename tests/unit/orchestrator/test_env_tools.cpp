// The env manager's process plumbing: how a Python worker is started (directly, or through
// `pixi run` in a pixi env), how a tool runs (output captured, a timeout that kills its whole
// process group, a clear error for a missing executable), and how the backend is chosen.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "orch/envs/env_backend.hpp"
#include "orch/envs/errc.hpp"
#include "orch/process/tool_process.hpp"
#include "orch/runtime/python_worker_command.hpp"
#include "temp_tree.hpp"

namespace orch::envs {
namespace {

using namespace std::chrono_literals;
using process::environment;
using process::run_tool;
using process::spawn_request;
using process::tool_command;
using runtime::python_worker_command;
using runtime::python_worker_spec;
using runtime::supervisor_options;

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

TEST(tool_process, output_is_captured_and_the_status_described) {
  tool_command c;
  c.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = run_tool(c);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_FALSE(r->succeeded());
  EXPECT_EQ(r->describe(), "exited with 3");
  EXPECT_NE(r->output.find("out"), std::string::npos);
  EXPECT_NE(r->output.find("err"), std::string::npos);
}

TEST(tool_process, environment_entries_are_set_and_removed) {
  ::setenv("ORCH_TOOL_TEST_GONE", "present", 1);
  tool_command c;
  c.argv = {"/bin/sh", "-c", "echo \"[$ORCH_TOOL_TEST_GONE][$ORCH_TOOL_TEST_SET]\""};
  c.env = {{"ORCH_TOOL_TEST_GONE", std::nullopt}, {"ORCH_TOOL_TEST_SET", "yes"}};
  auto r = run_tool(c);
  ::unsetenv("ORCH_TOOL_TEST_GONE");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->output, "[][yes]\n");
}

TEST(tool_process, a_timeout_kills_the_whole_process_group) {
  testing::temp_tree tmp;
  const auto marker = tmp.root() / "grandchild-survived";
  tool_command c;
  // The grandchild would write the marker after the timeout if the group were not killed.
  c.argv = {"/bin/sh", "-c", "(sleep 1; touch '" + marker.string() + "') & sleep 30"};
  c.timeout = 200ms;
  auto r = run_tool(c);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->describe(), "timed out");
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a process of the tool's group outlived it";
}

TEST(tool_process, a_missing_executable_is_named) {
  tool_command c;
  c.argv = {"orch-no-such-tool-anywhere"};
  auto r = run_tool(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, envs_errc::not_found);
  EXPECT_NE(r.err().message.find("orch-no-such-tool-anywhere"), std::string::npos);
}

TEST(env_backend, the_backend_asked_for_must_be_installed) {
  testing::temp_tree empty;
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", empty.root().c_str(), 1);
  auto pixi = choose_backend("pixi", "/usr/bin/python3");
  auto uv = choose_backend("uv", "/usr/bin/python3");
  auto fallback = choose_backend("", "/usr/bin/python3");
  auto unknown = choose_backend("conda", "/usr/bin/python3");
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(pixi);
  EXPECT_EQ(pixi.err().code, envs_errc::not_found);
  EXPECT_NE(pixi.err().message.find("pixi is not on PATH"), std::string::npos);
  ASSERT_FALSE(uv);
  EXPECT_EQ(unknown.err().code, envs_errc::invalid_request);
  if (std::filesystem::exists("/usr/bin/python3")) {
    ASSERT_TRUE(fallback) << fallback.err().message;
    EXPECT_EQ(*fallback, env_backend_kind::venv);
  }
}

}  // namespace
}  // namespace orch::envs
