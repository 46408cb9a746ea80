// The supervisor's losses (docs/runtime.md, "Supervision" and "Router"): a crash, a hung worker,
// a call past its deadline, restarts with a doubling backoff, and the crash loop that fails an
// env, driven through fake workers.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "orch/ipc/errc.hpp"
#include "orch/runtime/errc.hpp"
#include "supervisor_rig.hpp"

namespace orch::runtime_testing {
namespace {

using namespace std::chrono_literals;
using runtime::worker_state;
using ::testing::HasSubstr;

std::string workers(const std::string& extra) {
  return "handshake_timeout = \"2s\"\nheartbeat_interval = \"500ms\"\n"
         "crash_loop_window = \"60s\"\n" +
         extra;
}

// A script whose generations up to `bad` behave as `spoil` makes them, the rest good.
fake_launcher::script_source first_generations(std::uint32_t bad,
                                               std::function<void(fake_worker_script&)> spoil) {
  return [bad, spoil](const std::string&, std::uint32_t generation) {
    auto s = good_worker();
    if (generation <= bad) spoil(s);
    return s;
  };
}

TEST_F(supervisor_test, crash_in_a_call_fails_it_with_worker_died_and_the_next_runs_on_gen_two) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n"),
                   first_generations(1, [](fake_worker_script& s) {
                     s.on_call = [](const nlohmann::json&) {
                       fake_call_answer a;
                       a.crash = true;
                       return a;
                     };
                   }));
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 1));
  // Both sent to generation 1: the first is in flight when it dies, the second queued.
  auto first = call("alpha", "1");
  auto second = call("alpha", "2");
  auto r1 = first.get();
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.err().code, runtime::runtime_errc::worker_died);
  EXPECT_THAT(r1.err().message,
              HasSubstr("worker for env alpha (pid " + std::to_string(fake_launcher::first_pid) +
                        ", generation 1) its channel closed"));
  auto r2 = second.get();
  ASSERT_TRUE(r2.ok()) << r2.err().message;
  EXPECT_EQ((*r2)["outputs"], nlohmann::json::array({"2"}));
  const auto calls = launcher_->journal()->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].generation, 1u);
  EXPECT_EQ(calls[1].generation, 2u);
  const auto w = info("alpha");
  EXPECT_EQ(w.state, worker_state::ready);
  EXPECT_EQ(w.generation, 2u);
  EXPECT_EQ(w.losses, 1);
  EXPECT_EQ(launcher_->reaped().at(fake_launcher::first_pid), exited_with(1));
  const auto changes = state_changes();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].generation, 2u);
}

TEST_F(supervisor_test, heartbeat_loss_kills_the_hung_worker_and_replaces_it) {
  start_supervisor("handshake_timeout = \"2s\"\nheartbeat_interval = \"50ms\"\n"
                   "restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n",
                   first_generations(1, [](fake_worker_script& s) { s.heartbeat = false; }));
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 2));
  const auto w = info("alpha");
  EXPECT_EQ(w.losses, 1);
  EXPECT_THAT(w.last_error, HasSubstr("generation 1) stopped beating for "));
  EXPECT_THAT(w.last_error, HasSubstr(" ms: hung, killed and replaced"));
  const auto signals = launcher_->signals();
  ASSERT_FALSE(signals.empty());
  EXPECT_EQ(signals[0].pid, fake_launcher::first_pid);
  EXPECT_EQ(signals[0].signal, SIGKILL);
  EXPECT_EQ(launcher_->reaped().at(fake_launcher::first_pid), killed_by(SIGKILL));
}

TEST_F(supervisor_test, call_past_its_deadline_fails_and_replaces_the_worker) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n"),
                   first_generations(1, [](fake_worker_script& s) {
                     s.on_call = [](const nlohmann::json&) {
                       fake_call_answer a;
                       a.delay = 60s;  // never answered in time: the fake is killed first
                       return a;
                     };
                   }));
  start_env("alpha", 100ms);
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 1));
  auto r = call("alpha", "1").get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, ipc::channel_errc::deadline_exceeded);
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 2));
  EXPECT_THAT(info("alpha").last_error,
              HasSubstr("generation 1) did not answer a call within its deadline"));
  EXPECT_EQ(launcher_->reaped().at(fake_launcher::first_pid), killed_by(SIGKILL));
}

TEST_F(supervisor_test, restart_backoff_doubles_after_each_loss_up_to_its_maximum) {
  start_supervisor(workers("restart_backoff = \"40ms\"\nrestart_backoff_max = \"80ms\"\n"
                           "crash_loop_limit = 10\n"),
                   first_generations(3, [](fake_worker_script& s) { s.crash_after_ready = true; }));
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 4));
  EXPECT_EQ(info("alpha").losses, 3);
  const auto spawns = launcher_->spawns();
  ASSERT_EQ(spawns.size(), 4u);
  // Each start follows the loss before it by at least that loss's delay: 40, 80, then 80 ms
  // (the maximum). A timer never fires early, so these bounds hold on any machine.
  EXPECT_GE(spawns[1].at - spawns[0].at, 40ms);
  EXPECT_GE(spawns[2].at - spawns[1].at, 80ms);
  EXPECT_GE(spawns[3].at - spawns[2].at, 80ms);
}

TEST_F(supervisor_test, crash_loop_fails_the_env_and_its_queued_calls_with_pack_failed) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"20ms\"\n"
                           "crash_loop_limit = 2\nfailed_retry = \"0s\"\n"),
                   [](const std::string&, std::uint32_t) {
                     auto s = good_worker();
                     s.crash_before_hello = true;  // exits 1 while starting: worth a retry
                     return s;
                   });
  start_env("alpha");
  auto queued = call("alpha", "1");  // waits for a ready worker that never comes
  auto r = queued.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::pack_failed);
  EXPECT_THAT(r.err().message, HasSubstr("env alpha failed: worker for env alpha"));
  const auto w = info("alpha");
  EXPECT_EQ(w.state, worker_state::failed);
  EXPECT_EQ(w.generation, 3u);  // crash_loop_limit 2: the third loss in the window fails it
  EXPECT_EQ(w.losses, 3);
  EXPECT_FALSE(w.retry_at.has_value());  // failed_retry = 0: until the host restarts
  EXPECT_EQ(launcher_->spawns().size(), 3u);
  const auto changes = state_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].state, worker_state::failed);
  auto later = call("alpha", "2").get();
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.err().code, runtime::runtime_errc::pack_failed);
  EXPECT_THAT(later.err().message, HasSubstr("env alpha is failed: "));
}

TEST_F(supervisor_test, crash_loop_of_one_env_leaves_the_others_running) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"20ms\"\n"
                           "crash_loop_limit = 1\nfailed_retry = \"0s\"\n"),
                   [](const std::string& env, std::uint32_t) {
                     auto s = good_worker();
                     s.crash_before_hello = env == "broken";
                     return s;
                   });
  start_env("broken");
  start_env("healthy");
  ASSERT_TRUE(eventually_in("broken", worker_state::failed, 2));
  ASSERT_TRUE(eventually_in("healthy", worker_state::ready, 1));
  auto r = call("healthy", "1").get();
  ASSERT_TRUE(r.ok()) << r.err().message;
}

TEST_F(supervisor_test, failed_env_starts_again_after_failed_retry) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"20ms\"\n"
                           "crash_loop_limit = 1\nfailed_retry = \"100ms\"\n"),
                   first_generations(2, [](fake_worker_script& s) {
                     s.crash_before_hello = true;
                   }));
  start_env("alpha");
  ASSERT_TRUE(eventually_in("alpha", worker_state::ready, 3));
  const auto changes = state_changes();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].state, worker_state::failed);
  EXPECT_EQ(changes[0].generation, 2u);
  EXPECT_EQ(changes[1].state, worker_state::ready);
  EXPECT_EQ(changes[1].generation, 3u);
  const auto spawns = launcher_->spawns();
  ASSERT_EQ(spawns.size(), 3u);
  EXPECT_GE(spawns[2].at - spawns[1].at, 100ms);  // the cool-down of a first crash loop
  EXPECT_FALSE(info("alpha").retry_at.has_value());
}

TEST_F(supervisor_test, call_to_an_env_without_a_worker_fails_with_unknown_env) {
  start_supervisor(workers(""), [](const std::string&, std::uint32_t) { return good_worker(); });
  auto r = call("nowhere", "1").get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::unknown_env);
  EXPECT_EQ(r.err().message, "no worker runs env nowhere");
}

TEST_F(supervisor_test, kill_busy_kills_only_the_worker_inside_a_call) {
  start_supervisor(workers("restart_backoff = \"10ms\"\nrestart_backoff_max = \"40ms\"\n"),
                   [](const std::string& env, std::uint32_t generation) {
                     auto s = good_worker();
                     if (env == "busy" && generation == 1) {
                       s.on_call = [](const nlohmann::json&) {
                         fake_call_answer a;
                         a.delay = 60s;
                         return a;
                       };
                     }
                     return s;
                   });
  start_env("busy");
  start_env("idle");
  ASSERT_TRUE(eventually_in("busy", worker_state::ready, 1));
  ASSERT_TRUE(eventually_in("idle", worker_state::ready, 1));
  auto pending = call("busy", "1");
  ASSERT_TRUE(launcher_->journal()->wait_for_call("1", 1, generous_limit));
  const pid_t busy_pid = info("busy").pid;
  EXPECT_EQ(on_io([&] { return sup().kill_busy("while stopping"); }), 1u);
  auto r = pending.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::worker_died);
  const auto signals = launcher_->signals();
  ASSERT_FALSE(signals.empty());
  EXPECT_EQ(signals[0].pid, busy_pid);
  EXPECT_EQ(signals[0].signal, SIGKILL);
  EXPECT_EQ(info("idle").generation, 1u);
  EXPECT_EQ(info("idle").losses, 0);
}

}  // namespace
}  // namespace orch::runtime_testing

namespace {

// Issue 55: each further crash loop doubled an env's outage, which a client whose prompts crash
// a pack could push to days. It doubles up to an hour, or failed_retry where that is longer.
TEST(crash_loop_cool_down, doubles_per_loop_up_to_an_hour) {
  using orch::runtime::crash_loop_cool_down;
  using std::chrono::milliseconds;
  EXPECT_EQ(crash_loop_cool_down(milliseconds(60'000), 0), milliseconds(60'000));
  EXPECT_EQ(crash_loop_cool_down(milliseconds(60'000), 1), milliseconds(120'000));
  EXPECT_EQ(crash_loop_cool_down(milliseconds(60'000), 5), milliseconds(1'920'000));
  EXPECT_EQ(crash_loop_cool_down(milliseconds(60'000), 6), milliseconds(3'600'000));
  EXPECT_EQ(crash_loop_cool_down(milliseconds(60'000), 1 << 30), milliseconds(3'600'000));
  EXPECT_EQ(crash_loop_cool_down(milliseconds(100), 1000), milliseconds(3'600'000));
  // A failed_retry set longer than the cap is the user's: kept, never doubled.
  EXPECT_EQ(crash_loop_cool_down(milliseconds(7'200'000), 3), milliseconds(7'200'000));
}

}  // namespace
