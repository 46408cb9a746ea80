// The call path's fault behaviours on both of its lanes (docs/runtime.md, "The call lane"): a
// call through the router, made on the io thread, and a call on the worker's lane, written and
// answered on the caller's thread (runtime::checked_call from a thread of the test). Each test
// runs once per path, on real worker processes: a worker killed or stopped mid-call, a deadline,
// heartbeats through a long node, a replaced generation, an interrupt, progress before the
// answer, many callers at once; and the io thread taking over while the lane is busy.
#include <signal.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "orch/ipc/errc.hpp"
#include "orch/runtime/checked_call.hpp"
#include "orch/runtime/errc.hpp"
#include "runtime_fixture.hpp"

namespace orch::runtime_testing::call_lane_paths {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto typed_error_bound = 1000ms;  // promised: "within 1 s" of a SIGKILL
constexpr auto generous = 10s;

enum class call_path { router, lane };

class call_lane_faults : public runtime_test, public ::testing::WithParamInterface<call_path> {
 protected:
  static json body(const std::string& class_type, json inputs, std::uint64_t epoch = 1) {
    return {{"node", "1"}, {"class_type", class_type}, {"epoch", epoch}, {"inputs", inputs}};
  }

  std::shared_ptr<runtime::call_lane> lane(const std::string& env) {
    return host_->workers().lane(env);
  }

  // The call on this test's path, from the calling thread. On the lane, a call made while the
  // lane is free must go on it (counted by the lane); `may_fall_back` allows the router.
  result<json> call(const std::string& env, const json& b, bool may_fall_back = false) {
    if (GetParam() == call_path::router) {
      std::promise<result<json>> done;
      host_->on_io_thread([&] {
        host_->workers().call(env, b, [&done](result<json> r) { done.set_value(std::move(r)); });
      });
      return done.get_future().get();
    }
    const auto before = lane(env)->durations().count;
    auto c = runtime::checked_call(*host_, env, b, {});
    if (!may_fall_back) {
      EXPECT_EQ(lane(env)->durations().count, before + 1) << "the call did not go on the lane";
    }
    return std::move(c.response);
  }

  std::future<result<json>> call_async(const std::string& env, const json& b) {
    return std::async(std::launch::async, [this, env, b] { return call(env, b); });
  }

  // Until env's worker is inside a call on this test's path.
  bool wait_until_busy(const std::string& env) {
    return eventually(
        [&] {
          return GetParam() == call_path::lane ? lane(env)->busy()
                                               : host_->workers().busy_envs().count(env) > 0;
        },
        generous);
  }

  bool replaced(const std::string& env, std::uint32_t generation) {
    return eventually(
        [&] {
          const auto* w = host_->workers().find(env);
          return w->generation > generation && w->state == runtime::worker_state::ready;
        },
        generous);
  }
};

std::string path_name(const ::testing::TestParamInfo<call_path>& p) {
  return p.param == call_path::router ? "router" : "lane";
}

TEST_P(call_lane_faults, a_worker_killed_mid_call_fails_it_with_worker_died_within_a_second) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  const auto before = info(env);
  auto running = call_async(env, body("TestSleep", {{"ms", 20000}}));
  ASSERT_TRUE(wait_until_busy(env));
  ::kill(before.pid, SIGKILL);
  ASSERT_EQ(running.wait_for(typed_error_bound), std::future_status::ready);
  const auto r = running.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::worker_died);
  EXPECT_NE(r.err().message.find("env " + env), std::string::npos) << r.err().message;
  ASSERT_TRUE(replaced(env, before.generation));
  const auto again = call(env, body("TestEmpty", json::object()));
  ASSERT_TRUE(again.ok()) << again.err().message;
  EXPECT_EQ((*again)["status"], "ok");
}

TEST_P(call_lane_faults, a_call_past_its_deadline_fails_typed_and_its_worker_is_replaced) {
  deployment_options o;
  o.call_timeout = "300ms";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = env_of(*host_, "TestSleep");
  const auto before = info(env);
  const auto r = call(env, body("TestSleep", {{"ms", 20000}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, ipc::channel_errc::deadline_exceeded) << r.err().message;
  ASSERT_TRUE(replaced(env, before.generation));
  EXPECT_TRUE(process_gone(before.pid));
  EXPECT_NE(info(env).last_error.find("deadline"), std::string::npos) << info(env).last_error;
}

TEST_P(call_lane_faults, a_long_node_keeps_its_worker_alive_by_its_heartbeat) {
  ASSERT_NO_FATAL_FAILURE(start());  // heartbeat_interval 100 ms: hung after 300 ms unbeaten
  const std::string env = env_of(*host_, "TestSleep");
  const auto before = info(env);
  const auto r = call(env, body("TestSleep", {{"ms", 800}}));
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)["status"], "ok");
  EXPECT_EQ(info(env).generation, before.generation);
}

TEST_P(call_lane_faults, a_worker_stopped_mid_call_is_found_by_its_heartbeat) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  const auto before = info(env);
  auto running = call_async(env, body("TestSleep", {{"ms", 20000}}));
  ASSERT_TRUE(wait_until_busy(env));
  ::kill(before.pid, SIGSTOP);
  ASSERT_EQ(running.wait_for(generous), std::future_status::ready);
  const auto r = running.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, runtime::runtime_errc::worker_died);
  EXPECT_NE(r.err().message.find("stopped beating"), std::string::npos) << r.err().message;
  ASSERT_TRUE(replaced(env, before.generation));
}

TEST_P(call_lane_faults, a_call_after_a_replacement_goes_to_the_new_generation) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  const auto before = info(env);
  ASSERT_TRUE(kill_and_wait_for_replacement(env));
  const auto r = call(env, body("TestSleep", {{"ms", 1}}));
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)["outputs"][0], 1);
  const auto after = info(env);
  EXPECT_EQ(after.generation, before.generation + 1);
  // The new generation's control block counted the call: it ran there.
  EXPECT_EQ(host_->on_io_thread([&] {
    return host_->memory().control().block(after.slot).read()->call_count;
  }), 1u);
}

TEST_P(call_lane_faults, an_interrupt_reaches_the_node_of_a_call) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  auto running = call_async(env, body("TestSleep", {{"ms", 20000}}, 7));
  ASSERT_TRUE(wait_until_busy(env));
  host_->on_io_thread([&] { host_->workers().interrupt(7); });
  ASSERT_EQ(running.wait_for(generous), std::future_status::ready);
  const auto r = running.get();
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)["status"], "error");
  EXPECT_EQ((*r)["error"]["type"], ipc::node_error_type::interrupted);
}

TEST_P(call_lane_faults, a_nodes_progress_is_handled_before_its_answer) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestProgress");
  std::atomic<int> reports{0};
  host_->on_io_thread([&] {
    host_->workers().on_progress = [&reports](const std::string&, const json&) { ++reports; };
  });
  // 40 reports sent back to back, the last just before the answer: all handled before it.
  for (int i = 0; i < 20; ++i) {
    reports = 0;
    const auto r = call(env, body("TestProgress", {{"count", 40}}));
    ASSERT_TRUE(r.ok()) << r.err().message;
    ASSERT_EQ(reports.load(), 40) << "a progress report arrived after its call's answer";
  }
  host_->on_io_thread([&] { host_->workers().on_progress = nullptr; });
}

TEST_P(call_lane_faults, many_callers_at_once_each_get_their_own_answer) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  constexpr int threads = 8, calls = 20;
  std::vector<std::future<int>> wrong;
  for (int t = 0; t < threads; ++t) {
    wrong.push_back(std::async(std::launch::async, [&, t] {
      int bad = 0;
      for (int i = 0; i < calls; ++i) {
        // Callers that find the lane taken go through the router.
        const auto r = call(env, body("TestSleep", {{"ms", t % 3}}), /*may_fall_back=*/true);
        if (!r.ok() || (*r)["status"] != "ok" || (*r)["outputs"][0] != t % 3) ++bad;
      }
      return bad;
    }));
  }
  for (auto& f : wrong) EXPECT_EQ(f.get(), 0);
  const auto w = info(env);
  EXPECT_EQ(host_->on_io_thread([&] {
    return host_->memory().control().block(w.slot).read()->call_count;
  }), static_cast<std::uint64_t>(threads * calls));
}

INSTANTIATE_TEST_SUITE_P(both_paths, call_lane_faults,
                         ::testing::Values(call_path::router, call_path::lane), path_name);

// While a call on the lane holds the worker, the router's calls wait for it, and a second
// caller's call goes through the router: one call at a time per worker, on either path.
class call_lane_busy : public runtime_test {};

TEST_F(call_lane_busy, the_io_thread_takes_over_while_the_lane_is_busy) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestSleep");
  const auto lane = host_->workers().lane(env);
  const json slow{{"node", "1"}, {"class_type", "TestSleep"}, {"epoch", 1}, {"inputs", {{"ms", 400}}}};
  const json quick{{"node", "2"}, {"class_type", "TestSleep"}, {"epoch", 1}, {"inputs", {{"ms", 2}}}};
  std::atomic<bool> slow_done{false};
  auto on_lane = std::async(std::launch::async, [&] {
    auto c = runtime::checked_call(*host_, env, slow, {});
    slow_done = true;
    return std::move(c.response);
  });
  ASSERT_TRUE(eventually([&] { return lane->busy(); }, generous));
  const auto lane_calls = lane->durations().count;
  // The router's call, queued on the io thread: answered only after the lane's call ended.
  std::promise<bool> routed;
  host_->on_io_thread([&] {
    host_->workers().call(env, quick, [&](result<json> r) {
      routed.set_value(r.ok() && (*r)["status"] == "ok" && slow_done.load());
    });
  });
  // A second caller finds the lane taken: its call goes through the router.
  auto second = runtime::checked_call(*host_, env, quick, {});
  ASSERT_TRUE(second.response.ok()) << second.response.err().message;
  EXPECT_EQ((*second.response)["outputs"][0], 2);
  EXPECT_TRUE(slow_done.load()) << "the second call ran while the lane's call held the worker";
  EXPECT_TRUE(routed.get_future().get());
  const auto first = on_lane.get();
  ASSERT_TRUE(first.ok()) << first.err().message;
  EXPECT_EQ((*first)["outputs"][0], 400);
  EXPECT_EQ(lane->durations().count, lane_calls + 1) << "only the first call went on the lane";
  // And once the router's queue is empty, the lane is free again.
  const auto before = lane->durations().count;
  ASSERT_TRUE(runtime::checked_call(*host_, env, quick, {}).response.ok());
  EXPECT_EQ(lane->durations().count, before + 1);
}

}  // namespace
}  // namespace orch::runtime_testing::call_lane_paths
