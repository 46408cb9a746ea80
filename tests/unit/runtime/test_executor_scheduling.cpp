// The executor over a fake worker (docs/runtime.md, "Executor"): the order a prompt's nodes run
// in, the execution cache across prompts, and an interrupt of a running prompt.
#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor_rig.hpp"
#include "orch/ipc/errc.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;

// Two outputs over a shared producer. Ids sort otherwise than they read ("12" < "9"), so the
// order shows ComfyUI's walk: outputs by id, each one's inputs first, inputs by id.
std::string sum_prompt(int left) {
  return json{{"9", {{"class_type", "Number"}, {"inputs", {{"value", left}}}}},
              {"12", {{"class_type", "Number"}, {"inputs", {{"value", 3}}}}},
              {"4", {{"class_type", "Add"},
                     {"inputs", {{"a", json::array({"9", 0})}, {"b", json::array({"12", 0})}}}}},
              {"5", {{"class_type", "Show"}, {"inputs", {{"value", json::array({"4", 0})}}}}},
              {"7", {{"class_type", "Show"}, {"inputs", {{"value", json::array({"12", 0})}}}}}}
      .dump();
}

TEST_F(executor_test, runs_each_node_once_producers_first_in_comfyui_order) {
  start(manifests::cache_policy::none);
  const auto outcome = run(sum_prompt(2));
  ASSERT_TRUE(outcome.ok) << (outcome.error ? outcome.error->dump() : "");
  EXPECT_THAT(launcher_->journal()->node_calls(), ElementsAre("12", "9", "4", "5", "7"));
  EXPECT_EQ(outcome.nodes.at("4").outputs, json::array({5}));
  EXPECT_EQ(outcome.nodes.at("5").ui, (json{{"text", json::array({5})}}));
  EXPECT_EQ(outcome.nodes.at("7").ui, (json{{"text", json::array({3})}}));
  // Every call carried the prompt's epoch and its node's inputs, links resolved to values.
  for (const auto& c : launcher_->journal()->calls()) EXPECT_EQ(c.body["epoch"], outcome.epoch);
  EXPECT_EQ(launcher_->journal()->calls()[2].body["inputs"], (json{{"a", 2}, {"b", 3}}));
  EXPECT_EQ(events_of("execution_success").size(), 1u);
}

TEST_F(executor_test, second_identical_prompt_is_served_from_the_cache) {
  start(manifests::cache_policy::classic);
  ASSERT_TRUE(run(sum_prompt(2)).ok);
  ASSERT_EQ(launcher_->journal()->node_calls().size(), 5u);
  const auto again = run(sum_prompt(2));
  ASSERT_TRUE(again.ok);
  EXPECT_EQ(launcher_->journal()->node_calls().size(), 5u) << "no node ran a second time";
  for (const auto& [id, node] : again.nodes) EXPECT_TRUE(node.cached) << id;
  EXPECT_EQ(again.nodes.at("4").outputs, json::array({5}));
  const auto cached = events_of("execution_cached");
  ASSERT_EQ(cached.size(), 2u);
  EXPECT_EQ(cached[0]["nodes"], json::array());
  EXPECT_EQ(cached[1]["nodes"].size(), 5u);
  // A changed literal runs its node and what depends on it, nothing else.
  const auto changed = run(sum_prompt(4));
  ASSERT_TRUE(changed.ok);
  const auto calls = launcher_->journal()->node_calls();
  EXPECT_THAT(std::vector<std::string>(calls.begin() + 5, calls.end()), ElementsAre("9", "4", "5"));
  EXPECT_EQ(changed.nodes.at("4").outputs, json::array({7}));
  EXPECT_TRUE(changed.nodes.at("12").cached);
}

TEST_F(executor_test, interrupt_stops_the_running_node_and_skips_the_rest_of_the_prompt) {
  start(manifests::cache_policy::none);
  const std::string waiting =
      json{{"1", {{"class_type", "Number"}, {"inputs", {{"value", 1}}}}},
           {"2", {{"class_type", "Wait"}, {"inputs", {{"value", json::array({"1", 0})}}}}},
           {"3", {{"class_type", "Show"}, {"inputs", {{"value", json::array({"2", 0})}}}}}}
          .dump();
  auto running = std::async(std::launch::async, [&] { return run(waiting); });
  ASSERT_TRUE(launcher_->journal()->wait_for_call("2", 1, std::chrono::seconds(10)));
  executor_->interrupt();
  const auto outcome = running.get();
  EXPECT_FALSE(outcome.ok);
  ASSERT_TRUE(outcome.error.has_value());
  EXPECT_EQ((*outcome.error)["exception_type"], ipc::node_error_type::interrupted);
  EXPECT_EQ((*outcome.error)["node_id"], "2");
  EXPECT_THAT(launcher_->journal()->node_calls(), ElementsAre("1", "2"));
  EXPECT_THAT(launcher_->journal()->interrupts(), ElementsAre(outcome.epoch));
  EXPECT_EQ(events_of("execution_interrupted").size(), 1u);
  EXPECT_TRUE(events_of("execution_error").empty());
  // Cleared as serve clears it before the next queued prompt: the next prompt runs whole.
  executor_->clear_interrupt();
  EXPECT_TRUE(run(sum_prompt(2)).ok);
}

}  // namespace
}  // namespace orch::runtime_testing
