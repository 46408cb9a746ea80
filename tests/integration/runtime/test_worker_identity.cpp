// What a real worker shows (docs/runtime.md): its startup token is nowhere in its environment
// (/proc/<pid>/environ keeps what execve got, whatever unsetenv does later), a wrong token is
// still refused, and every log line it writes names its env while its plugin loads stay at debug.
#include <sys/wait.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class worker_identity : public runtime_test {
 protected:
  struct cli_output {
    int exit_code = -1;
    std::string out, err;
  };

  cli_output comfy_orch_run(const std::string& env_prefix = "") {
    const fs::path deployment = write_deployment();
    write(dir_ / "prompt.json", R"({"1": {"class_type": "TestEmpty", "inputs": {}}})");
    const std::string cmd = "env " + env_prefix + " " + std::string(ORCH_TEST_COMFY_ORCH) +
                            " run '" + deployment.string() + "' --prompt '" +
                            (dir_ / "prompt.json").string() + "' >'" + (dir_ / "out").string() +
                            "' 2>'" + (dir_ / "err").string() + "'";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "out"),
            slurp(dir_ / "err")};
  }
};

TEST_F(worker_identity, a_workers_environ_holds_no_startup_token) {
  // A variable of that name in the operator's shell must not reach the worker either.
  const std::string planted = "planted-by-the-operator-0123456789";
  ::setenv("ORCH_WORKER_TOKEN", planted.c_str(), 1);
  start();
  const bool started = !HasFatalFailure();
  ::unsetenv("ORCH_WORKER_TOKEN");  // before any return: the variable must not reach later tests
  ASSERT_TRUE(started);
  const auto workers = host_->on_io_thread([&] { return host_->workers().workers(); });
  ASSERT_EQ(workers.size(), 3u);
  for (const auto& w : workers) {
    ASSERT_EQ(w.state, runtime::worker_state::ready) << w.env << ": " << w.last_error;
    const std::string environ = slurp("/proc/" + std::to_string(w.pid) + "/environ");
    ASSERT_FALSE(environ.empty()) << "cannot read the environ of worker " << w.env;
    EXPECT_EQ(environ.find("ORCH_WORKER_TOKEN"), std::string::npos) << w.env;
    EXPECT_EQ(environ.find(planted), std::string::npos) << w.env;
    EXPECT_NE(environ.find("ORCH_WORKER_ENV=" + w.env), std::string::npos) << w.env;
  }
  EXPECT_TRUE(run(R"({"1": {"class_type": "TestEmpty", "inputs": {}}})").ok);
}

TEST_F(worker_identity, a_worker_that_presents_a_wrong_token_is_refused) {
  // The real worker, with its token pipe (fd 5) replaced by a file holding another token.
  write(dir_ / "wrong-token", "0123456789abcdef0123456789abcdef");
  write(dir_ / "wrong-token-worker", "#!/bin/sh\nexec '" + std::string(ORCH_TEST_WORKER) +
                                         "' \"$@\" 5<'" + (dir_ / "wrong-token").string() + "'\n");
  fs::permissions(dir_ / "wrong-token-worker", fs::perms::owner_all);
  deployment_options o;
  o.crash_loop_limit = 1;
  o.worker_executable = (dir_ / "wrong-token-worker").string();
  ASSERT_NO_FATAL_FAILURE(start(o));
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
    EXPECT_EQ(w.state, runtime::worker_state::failed) << w.env;
    EXPECT_NE(w.last_error.find("sent a hello that does not match its startup token"),
              std::string::npos)
        << w.last_error;
  }
  EXPECT_EQ(host_->catalogue().size(), 0u);
}

TEST_F(worker_identity, every_worker_log_line_names_its_env_and_plugin_loads_stay_at_debug) {
  const auto r = comfy_orch_run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::set<std::string> envs;
  for (const auto& line : lines_of(r.out)) {
    if (line.rfind("worker ", 0) == 0 && line.find(": ready") != std::string::npos) {
      envs.insert(line.substr(7, line.find(':') - 7));
    }
  }
  ASSERT_EQ(envs.size(), 3u) << r.out;
  std::set<std::string> seen;
  for (const auto& line : lines_of(r.err)) {
    const auto at = line.find("[comfy-orch-worker");
    if (at == std::string::npos) continue;
    const auto end = line.find(']', at);
    const std::string tag = line.substr(at + 1, end - at - 1);  // "comfy-orch-worker <env>"
    const std::string env = tag.size() > 18 ? tag.substr(18) : std::string();
    EXPECT_EQ(envs.count(env), 1u) << "a worker line without its env: " << line;
    seen.insert(env);
  }
  EXPECT_EQ(seen, envs) << "every worker logs at least its shutdown:\n" << r.err;
  EXPECT_EQ(r.err.find("plugin loaded"), std::string::npos) << r.err;
  // The run's own output stays: events, the memory table and its why: lines.
  EXPECT_NE(r.out.find("execution_success"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("why:"), std::string::npos) << r.out;

  // At debug the plugin loads are there, each under its worker's env.
  const auto debug = comfy_orch_run("ORCH_LOG_LEVEL=debug");
  ASSERT_EQ(debug.exit_code, 0) << debug.err;
  int worker_loads = 0;
  for (const auto& line : lines_of(debug.err)) {
    if (line.find("plugin loaded") == std::string::npos) continue;
    if (line.find("[comfy-orch-worker ") != std::string::npos) ++worker_loads;
  }
  EXPECT_GT(worker_loads, 0) << debug.err;
}

}  // namespace
}  // namespace orch::runtime_testing
