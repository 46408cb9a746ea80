// The supervisor's start and handshake (docs/runtime.md, "Start-up and handshake" and "Workers
// that cannot start"), driven through fake workers.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "orch/process/errc.hpp"
#include "orch/runtime/errc.hpp"
#include "supervisor_rig.hpp"

namespace orch::runtime_testing {
namespace {

using runtime::worker_state;
using ::testing::HasSubstr;

// Quick restarts and no cool-down after a crash loop; the heartbeat stays far from any test.
const std::string quick = "handshake_timeout = \"2s\"\nheartbeat_interval = \"500ms\"\n"
                          "restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n"
                          "crash_loop_limit = 3\nfailed_retry = \"0s\"\n";

// The code a real worker sends for a pack that does not import (worker/src/worker_errc.hpp,
// which the host does not link).
constexpr const char* pack_import_failed = "pack_import_failed";

TEST_F(supervisor_test, start_completes_the_handshake_and_reports_ready_with_node_classes) {
  start_supervisor(quick, [](const std::string&, std::uint32_t) { return good_worker(); });
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 1));
  const auto w = info("alpha");
  EXPECT_EQ(w.pid, fake_launcher::first_pid);
  EXPECT_EQ(w.losses, 0);
  EXPECT_EQ(w.last_error, "");
  ASSERT_EQ(w.nodes.size(), 1u);
  EXPECT_EQ(w.nodes[0]["class_type"], "Echo");
  EXPECT_EQ(w.manager, "ledger");
  EXPECT_TRUE(w.settings_match) << "the fake published the hash of the settings it was sent";
  EXPECT_NE(w.slot, runtime::host_slot);
  const auto changes = state_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].state, worker_state::ready);
  EXPECT_EQ(changes[0].generation, 1u);
  auto r = call("alpha", "7").get();
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)["outputs"], nlohmann::json::array({"7"}));
}

TEST_F(supervisor_test, handshake_timeout_kills_the_silent_worker_and_starts_generation_two) {
  start_supervisor("handshake_timeout = \"100ms\"\nheartbeat_interval = \"50ms\"\n"
                   "restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n",
                   [](const std::string&, std::uint32_t generation) {
                     auto s = good_worker();
                     s.answer_hello = generation > 1;  // the first start says nothing
                     return s;
                   });
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 2));
  const auto w = info("alpha");
  EXPECT_EQ(w.losses, 1);
  EXPECT_THAT(w.last_error, HasSubstr("worker for env alpha (pid " +
                                      std::to_string(fake_launcher::first_pid) +
                                      ") did not complete its handshake within 100 ms"));
  EXPECT_THAT(w.last_error, HasSubstr("raise [workers] handshake_timeout"));
  const auto signals = launcher_->signals();
  ASSERT_EQ(signals.size(), 1u);
  EXPECT_EQ(signals[0].pid, fake_launcher::first_pid);
  EXPECT_EQ(signals[0].signal, SIGKILL);
  EXPECT_EQ(launcher_->reaped().at(fake_launcher::first_pid), killed_by(SIGKILL));
  EXPECT_EQ(w.pid, fake_launcher::first_pid + 1);
}

TEST_F(supervisor_test, hello_with_a_wrong_token_is_refused_and_the_worker_replaced) {
  start_supervisor(quick, [](const std::string&, std::uint32_t generation) {
    auto s = good_worker();
    if (generation == 1) s.hello_token = "not-the-startup-token";
    return s;
  });
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 2));
  const auto w = info("alpha");
  EXPECT_EQ(w.losses, 1);
  EXPECT_THAT(w.last_error,
              HasSubstr("generation 1) sent a hello that does not match its startup token"));
}

TEST_F(supervisor_test, setup_failed_marks_the_env_failed_without_a_restart) {
  start_supervisor(quick, [](const std::string&, std::uint32_t) {
    auto s = good_worker();
    s.setup_failure_code = pack_import_failed;
    s.setup_failure = "No module named 'missing_dependency'";
    return s;
  });
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::failed, 1));
  const auto w = info("alpha");
  EXPECT_THAT(w.last_error,
              HasSubstr("cannot start: [pack_import_failed] No module named "
                        "'missing_dependency'; not restarted (a retry cannot succeed)"));
  EXPECT_EQ(launcher_->spawns().size(), 1u);
  EXPECT_EQ(launcher_->reaped().at(fake_launcher::first_pid), exited_with(66));
  const auto changes = state_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].state, worker_state::failed);
  auto r = call("alpha", "1").get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::pack_failed);
  EXPECT_THAT(r.err().message, HasSubstr("env alpha is failed: "));
}

TEST_F(supervisor_test, exec_failure_fails_the_env_without_a_restart) {
  start_supervisor(quick, [](const std::string&, std::uint32_t) { return good_worker(); });
  launcher_->fail_next_spawn(
      error{process::process_errc::exec_failed,
            "cannot execute /nonexistent/comfy-orch-worker: No such file or directory"});
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::failed, 1));
  const auto w = info("alpha");
  EXPECT_THAT(w.last_error, HasSubstr("generation 1) cannot start: cannot execute "
                                      "/nonexistent/comfy-orch-worker: No such file or directory"));
  EXPECT_EQ(w.pid, -1);
  EXPECT_TRUE(launcher_->spawns().empty());
}

TEST_F(supervisor_test, exit_with_the_setup_status_while_starting_is_not_retried) {
  start_supervisor(quick, [](const std::string&, std::uint32_t) {
    auto s = good_worker();
    s.crash_before_hello = true;
    s.exit_status = exited_with(66);
    return s;
  });
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::failed, 1));
  EXPECT_THAT(info("alpha").last_error,
              HasSubstr("cannot start: it exited with 66 (ORCH_WORKER_EXIT_SETUP"));
  EXPECT_EQ(launcher_->spawns().size(), 1u);
}

TEST_F(supervisor_test, graceful_shutdown_is_answered_and_every_worker_exits_cleanly) {
  start_supervisor(quick, [](const std::string&, std::uint32_t) { return good_worker(); });
  start_env("alpha");
  start_env("beta");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 1));
  ASSERT_TRUE(eventually_in("beta", worker_state::ready, 1));
  on_io([&] {
    sup().begin_shutdown(std::chrono::seconds(5));
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return sup().shutdown_answered(); }));
  on_io([&] {
    sup().finish_shutdown(std::chrono::seconds(5));
    return 0;
  });
  EXPECT_EQ(info("alpha").state, worker_state::stopped);
  EXPECT_EQ(info("beta").state, worker_state::stopped);
  // Each closed its channel after its answer and exited 0: nothing had to be killed.
  EXPECT_TRUE(launcher_->signals().empty());
  for (const auto& [pid, status] : launcher_->reaped()) EXPECT_EQ(status, exited_with(0)) << pid;
  EXPECT_EQ(launcher_->reaped().size(), 2u);
}

}  // namespace
}  // namespace orch::runtime_testing
