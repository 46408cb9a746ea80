// What goes wrong in a Python pack stays a typed error of that node or that env (docs/python.md):
// an exception is ComfyUI's execution_error with its type and traceback, a native crash is a
// worker crash followed by a respawn, an import error stops that env only, output from threads
// reaches the log whole, and a worker killed mid-call leaves nothing behind.
#include <fcntl.h>

#include <fstream>
#include <sstream>

#include "../cli/command_runner.hpp"
#include "python_fixture.hpp"

namespace orch::python_testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class python_faults : public python_worker_test {};

TEST_F(python_faults, an_exception_is_an_execution_error_with_its_type_message_and_traceback) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const auto o = run_json(
      {{"1", {{"class_type", "Raise"}, {"inputs", {{"message", "gamma must be positive"}}}}}});
  ASSERT_FALSE(o.ok);
  const json& e = *o.error;
  EXPECT_EQ(e["exception_type"], "ValueError");
  // The event as a ComfyUI client gets it: the Python type name as it is, no comfy-orch code.
  for (const auto& ev : events_.events()) {
    if (ev["type"] != "execution_error") continue;
    EXPECT_EQ(ev["data"]["exception_type"], "ValueError");
    EXPECT_FALSE(ev["data"].contains("orch_error_type")) << ev.dump();
  }
  EXPECT_EQ(e["exception_message"], "gamma must be positive");
  EXPECT_EQ(e["node_id"], "1");
  EXPECT_EQ(e["node_type"], "Raise");
  ASSERT_TRUE(e["traceback"].is_array());
  ASSERT_GE(e["traceback"].size(), 2u) << e.dump();
  // ComfyUI's traceback.format_tb: the frames only, each "  File ..., line N, in f\n    code\n".
  for (const auto& frame : e["traceback"])
    EXPECT_EQ(frame.get<std::string>().rfind("  File \"", 0), 0u) << frame;
  const std::string all = e["traceback"].dump();
  EXPECT_NE(all.find("raise ValueError(message)"), std::string::npos) << all;
  // The worker lives on: the next prompt runs.
  EXPECT_TRUE(run_json({{"1", {{"class_type", "Lists"}, {"inputs", {{"value", 1}}}}}}).ok);
}

// H1, H2: what a worker writes to its own fds 1 and 2 never reaches the host's: `run --json`'s
// stdout carries only the host's events, escape sequences arrive escaped, and 50 MiB of lines
// from one node are cut to what the rate lets through, with a line saying so.
TEST_F(python_faults, a_workers_raw_output_cannot_forge_events_or_flood_the_log) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  host_->shutdown(std::chrono::milliseconds(2000));  // the CLI runs its own host
  const fs::path prompt = dir_ / "raw.json";
  write(prompt, R"({"1": {"class_type": "RawOutput", "inputs": {"mib": 50}}})");
  const auto r = orch::testing::run_command(std::string("'") + ORCH_TEST_COMFY_ORCH + "' run '" +
                                            (dir_ / "deployment.toml").string() + "' --prompt '" +
                                            prompt.string() + "' --json");
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const auto event = json::parse(line, nullptr, false);
    ASSERT_FALSE(event.is_discarded()) << line;
    EXPECT_EQ(line.find("forged"), std::string::npos) << line;
  }
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_NE(r.err.find("\\e[2J\\e[31mcleared your terminal"), std::string::npos);
  // C1 controls, bidi overrides and invalid UTF-8 are escaped as printable() escapes them.
  EXPECT_NE(r.err.find("c1 \\u{009b}2J bidi \\u{202e}evil bad \xef\xbf\xbd\xef\xbf\xbd end"),
            std::string::npos);
  EXPECT_EQ(r.err.find("\xe2\x80\xae"), std::string::npos);
  EXPECT_NE(r.err.find("execution_success"), std::string::npos);  // the forged line, as a log line
  EXPECT_LT(r.err.size(), std::size_t{16} << 20) << "50 MiB of output reached the log";
  EXPECT_NE(r.err.find("bytes of its output dropped"), std::string::npos);
}

// H8: a helper a node detached (setsid, double fork) had outlived the server.
TEST_F(python_faults, a_process_a_node_detached_does_not_outlive_the_host) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const std::string pid_file = (dir_ / "detached.pid").string();
  const auto o = run_json({{"1", {{"class_type", "Detach"}, {"inputs", {{"pid_file", pid_file}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const pid_t helper = static_cast<pid_t>(output(o, "1", 0));
  ASSERT_GT(helper, 0);
  ASSERT_EQ(::kill(helper, 0), 0) << "the helper is not running";
  host_->shutdown(std::chrono::milliseconds(2000));
  // Gone, or a zombie its new parent has not reaped yet.
  const auto gone = [&] {
    const std::string stat = orch::testing::slurp("/proc/" + std::to_string(helper) + "/stat");
    const auto close = stat.rfind(')');
    return stat.empty() || (close != std::string::npos && stat.substr(close + 2, 1) == "Z");
  };
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    ended = gone();
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) ::kill(helper, SIGKILL);
  EXPECT_TRUE(ended) << "the detached helper outlived the host";
}

// H8: a detached helper that also clears its environment carries no mark; `comfy-orch run` is a
// child subreaper, so the helper is re-parented to it and ends with its host.
TEST_F(python_faults, a_detached_helper_that_clears_its_environment_ends_with_run) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  host_->shutdown(std::chrono::milliseconds(2000));  // the CLI runs its own host
  const fs::path pid_file = dir_ / "detached.pid";
  const fs::path prompt = dir_ / "detach.json";
  write(prompt, json{{"1", {{"class_type", "Detach"},
                            {"inputs", {{"pid_file", pid_file.string()}, {"clear_env", true}}}}}}
                    .dump());
  const auto r = orch::testing::run_command(std::string("'") + ORCH_TEST_COMFY_ORCH + "' run '" +
                                            (dir_ / "deployment.toml").string() + "' --prompt '" +
                                            prompt.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const pid_t helper = static_cast<pid_t>(std::stol(orch::testing::slurp(pid_file)));
  ASSERT_GT(helper, 0);
  // run has exited: the helper is gone (or a zombie init has not reaped yet), not sleeping on.
  const std::string stat = orch::testing::slurp("/proc/" + std::to_string(helper) + "/stat");
  const auto close = stat.rfind(')');
  const bool gone = stat.empty() || (close != std::string::npos && stat.substr(close + 2, 1) == "Z");
  if (!gone) ::kill(helper, SIGKILL);
  EXPECT_TRUE(gone) << "the helper outlived `comfy-orch run`: " << stat;
  EXPECT_NE(r.err.find("adopted process(es)"), std::string::npos) << r.err;
}

TEST_F(python_faults, a_subgraph_expansion_fails_its_node_saying_only_comfyui_runs_it) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const auto o = run_json({{"1", {{"class_type", "Expand"}, {"inputs", json::object()}}}});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ((*o.error)["exception_type"], "NotImplementedError") << o.error->dump();
  const std::string message = (*o.error)["exception_message"];
  EXPECT_NE(message.find("returned a subgraph expansion"), std::string::npos) << message;
  EXPECT_NE(message.find("comfy-orch launch"), std::string::npos) << message;
}

TEST_F(python_faults, a_segfault_in_the_interpreter_is_a_worker_crash_then_a_respawn) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const std::string env = runtime_testing::env_of(*host_, "Crash");
  const auto before = info(env);
  const auto start = steady_clock::now();
  const auto o = run_json({{"1", {{"class_type", "Crash"}, {"inputs", json::object()}}}});
  const auto took = steady_clock::now() - start;
  ASSERT_FALSE(o.ok);
  EXPECT_EQ((*o.error)["exception_type"], "worker_died") << o.error->dump();
  EXPECT_LT(took, milliseconds(1000));
  ASSERT_TRUE(eventually(
      [&] {
        const auto* w = host_->workers().find(env);
        return w->generation > before.generation && w->state == runtime::worker_state::ready;
      },
      std::chrono::seconds(20)));
  EXPECT_TRUE(run_json({{"1", {{"class_type", "Lists"}, {"inputs", {{"value", 1}}}}}}).ok);
}

TEST_F(python_faults, a_pack_whose_import_fails_stops_only_its_own_env_with_the_cause) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract", "PyBroken"}));
  std::string broken;
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
    if (w.env.find("pybroken") != std::string::npos) broken = w.env;
  }
  ASSERT_FALSE(broken.empty());
  const auto w = info(broken);
  EXPECT_EQ(w.state, runtime::worker_state::failed);
  EXPECT_NE(w.last_error.find("ModuleNotFoundError"), std::string::npos) << w.last_error;
  EXPECT_NE(w.last_error.find("definitely_not_installed_module"), std::string::npos)
      << w.last_error;
  // The memory table says so too, and every other pack runs.
  bool in_table = false;
  for (const auto& r : runtime::read_memory_table(*host_)) {
    if (r.process == broken) in_table = r.state == "failed";
  }
  EXPECT_TRUE(in_table);
  EXPECT_TRUE(run_json({{"1", {{"class_type", "Lists"}, {"inputs", {{"value", 1}}}}}}).ok);
}

TEST_F(python_faults, prints_and_logging_from_several_threads_reach_the_log_whole) {
  // Workers inherit the host's stderr: point it at a file for this test.
  const fs::path log = dir_ / "stderr.log";
  const int saved = ::dup(2);
  const int file = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0);
  ::dup2(file, 2);
  ::close(file);
  start_python({"PyContract"});
  const auto o =
      run_json({{"1", {{"class_type", "Chatty"}, {"inputs", {{"threads", 4}, {"lines", 50}}}}}});
  host_->shutdown(std::chrono::seconds(2));
  ::dup2(saved, 2);
  ::close(saved);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(o.ok) << o.error->dump();
  std::ifstream in(log);
  std::string line;
  int whole = 0;
  bool logging_line = false, info_line = false;
  const std::string env = runtime_testing::env_of(*host_, "Chatty");
  while (std::getline(in, line)) {
    if (line.find("chatty logging line") != std::string::npos) {
      logging_line = line.find("[" + std::string("comfy-orch-worker ") + env + "] [warning]") !=
                     std::string::npos;
    }
    // Below WARNING: only the worker's own handler lets it through, at its level.
    if (line.find("[info] chatty: chatty info line") != std::string::npos) info_line = true;
    if (line.find("chatty thread") == std::string::npos) continue;
    // Every line is one print, tagged with the env, and nothing else.
    EXPECT_NE(line.find("[comfy-orch-worker " + env + "] [info] chatty thread"), std::string::npos)
        << line;
    EXPECT_EQ(line.substr(line.size() - 40), std::string(40, 'x')) << line;
    ++whole;
  }
  EXPECT_EQ(whole, 200);
  EXPECT_TRUE(logging_line);
  EXPECT_TRUE(info_line);
}

TEST_F(python_faults, a_python_worker_killed_mid_call_fails_the_call_fast_and_leaves_nothing) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const std::string env = runtime_testing::env_of(*host_, "Sleep");
  auto running = run_async(
      json{{"1", {{"class_type", "Sleep"}, {"inputs", {{"seconds", 30.0}}}}}}.dump(), "1");
  const pid_t pid = info(env).pid;
  const auto start = steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto o = running.get();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
  ASSERT_FALSE(o.ok);
  EXPECT_EQ((*o.error)["exception_type"], "worker_died");
  // TearDown checks that no fd, /dev/shm entry or process is left behind.
}

TEST_F(python_faults, an_interrupt_reaches_the_running_python_node) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  auto running = run_async(
      json{{"1", {{"class_type", "Sleep"}, {"inputs", {{"seconds", 30.0}}}}}}.dump(), "1");
  executor_->interrupt();
  const auto o = running.get();
  ASSERT_FALSE(o.ok);
  EXPECT_EQ((*o.error)["exception_type"], "interrupted") << o.error->dump();
}

}  // namespace
}  // namespace orch::python_testing
