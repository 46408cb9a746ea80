// A live `comfy-orch serve` when a worker dies or the server is stopped (docs/serve.md, "Stopping
// and faults"): the prompt that ran fails, the worker is replaced and shown so live, and SIGTERM
// interrupts the running prompt and stops every worker.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "serve_fixture.hpp"
#include "wait_until.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, a_worker_killed_during_a_prompt_fails_that_prompt_and_the_next_three_run) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const auto pids = worker_pids(*s);
  const std::string doomed = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  const std::string test_env = s->get("/object_info/TestSleep").json()["TestSleep"]["orch_env"];
  ASSERT_EQ(::kill(pids.at(test_env), SIGKILL), 0);
  EXPECT_TRUE(heard(ws.until_prompt_end(doomed), "execution_error"))
      << "the client did not hear the failure";
  EXPECT_EQ(history_of(*s, doomed)["status"]["status_str"], "error");
  for (int n = 0; n < 3; ++n) {
    const std::string id = queue(*s, sleep_prompt(1 + n), "c");  // distinct: none is cached
    ws.until_prompt_end(id);
    EXPECT_EQ(history_of(*s, id)["status"]["status_str"], "success") << "prompt " << n;
  }
  EXPECT_NE(worker_pids(*s).at(test_env), pids.at(test_env));  // it was respawned
  EXPECT_EQ(s->stop(), 0);
}

// GET /orch/status (docs/cli.md, "status"): every process, read from the control segment.
TEST_F(serve_test, orch_status_shows_every_process_and_a_replaced_worker_live) {
  auto s = serve();
  auto status = [&] { return s->get("/orch/status").json(); };
  auto entry = [](const json& doc, const std::string& process) {
    for (const auto& e : doc["processes"])
      if (e["process"] == process) return e;
    return json();
  };
  const json before = status();
  ASSERT_EQ(before["processes"].size(), 4u) << before.dump(2);  // the host and three workers
  const json host = entry(before, "host");
  EXPECT_EQ(host["mode"], "host");
  EXPECT_EQ(host["device"], "sim");
  EXPECT_EQ(host["free_view"], "device");
  EXPECT_EQ(host["manager"], "pager");
  EXPECT_GT(host["device_total_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(host["plugins"][0]["slot"], "pager");
  EXPECT_EQ(host["applied_settings"]["streams"], "2");
  EXPECT_GT(before["budget_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_GT(before["physical_ram_bytes"].get<std::uint64_t>(), 0u);
  const std::string test_env = s->get("/object_info/TestSleep").json()["TestSleep"]["orch_env"];
  const json worker = entry(before, test_env);
  EXPECT_EQ(worker["mode"], "worker");
  EXPECT_EQ(worker["state"], "ready");
  EXPECT_EQ(worker["restarts"], 0);
  EXPECT_TRUE(worker["settings_match"].get<bool>());
  EXPECT_FALSE(worker["applied_settings"].empty()) << worker.dump(2);
  EXPECT_EQ(worker["applied_settings"], worker["expected_settings"]);
  EXPECT_EQ(worker["plugins"].size(), 3u) << "pager, allocator and backend: " << worker.dump(2);

  const std::string id = queue(*s, sleep_prompt(1));
  finished(*s, id);
  EXPECT_GE(entry(status(), test_env)["calls"].get<int>(), 1);

  ASSERT_EQ(::kill(worker["pid"].get<pid_t>(), SIGKILL), 0);
  json replaced;
  wait_until([&] {
    replaced = entry(status(), test_env);
    return replaced["state"] == "ready" && replaced["pid"] != worker["pid"];
  });
  EXPECT_EQ(replaced["state"], "ready") << replaced.dump(2);
  EXPECT_EQ(replaced["restarts"], 1);
  EXPECT_GT(replaced["generation"].get<int>(), worker["generation"].get<int>());
  EXPECT_NE(replaced.value("last_error", ""), "");
  EXPECT_EQ(s->post("/orch/status", json::object()).status, 405u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, sigterm_interrupts_the_running_prompt_and_stops_every_worker) {
  auto s = serve();
  const auto pids = worker_pids(*s);
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  wait_until_one_runs(*s);
  EXPECT_EQ(s->stop(), 0);
  // Interrupted, not waited out: its client heard so before serve closed the connection (a
  // prompt let finish would end in execution_success after its minute).
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  for (const auto& [env, pid] : pids)
    EXPECT_TRUE(orch::runtime_testing::process_gone(pid)) << env << " worker left running";
}

}  // namespace
