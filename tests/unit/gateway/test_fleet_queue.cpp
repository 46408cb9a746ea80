// The gateway's queue (fleet_queue.hpp): ComfyUI's numbers and order, any pending prompt taken
// for a host, several running, a prompt requeued at its place, and the history's caps.
#include <gtest/gtest.h>

#include "orch/gateway/fleet_queue.hpp"

namespace orch::gateway {
namespace {

using nlohmann::json;

fleet_prompt prompt(fleet_queue& q, const std::string& id, bool front = false,
                    const std::string& client = "c") {
  fleet_prompt p;
  p.prompt_id = id;
  p.number = q.next_number(front);
  p.document = {{"1", {{"class_type", "X"}, {"inputs", json::object()}}}};
  p.extra_data = {{"client_id", client}};
  return p;
}

std::vector<std::string> pending_ids(const fleet_queue& q) {
  std::vector<std::string> ids;
  for (const auto& p : q.pending()) ids.push_back(p.prompt_id);
  return ids;
}

TEST(fleet_queue, numbers_count_up_and_front_is_negated) {
  fleet_queue q;
  EXPECT_TRUE(q.put(prompt(q, "a")));
  EXPECT_TRUE(q.put(prompt(q, "b")));
  EXPECT_TRUE(q.put(prompt(q, "c", /*front=*/true)));
  EXPECT_EQ(pending_ids(q), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(q.pending()[0].number, -2);
  const json queue = q.queue_json();
  EXPECT_EQ(queue["queue_pending"][0][0], -2);
  EXPECT_EQ(queue["queue_pending"][0][1], "c");
  EXPECT_EQ(queue["queue_pending"][1][0], 0);
  EXPECT_TRUE(queue["queue_running"].empty());
}

TEST(fleet_queue, equal_numbers_keep_the_order_they_were_queued) {
  fleet_queue q;
  auto a = prompt(q, "a");
  auto b = prompt(q, "b");
  b.number = a.number = 7;
  EXPECT_TRUE(q.put(std::move(a)));
  EXPECT_TRUE(q.put(std::move(b)));
  EXPECT_EQ(pending_ids(q), (std::vector<std::string>{"a", "b"}));
}

TEST(fleet_queue, any_pending_prompt_may_be_taken_and_several_run_at_once) {
  fleet_queue q;
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(q.put(prompt(q, id)));
  EXPECT_TRUE(q.take("b", "host-1"));
  EXPECT_TRUE(q.take("a", "host-0"));
  EXPECT_FALSE(q.take("b", "host-2"));  // no longer pending
  EXPECT_EQ(pending_ids(q), (std::vector<std::string>{"c"}));
  EXPECT_EQ(q.running().size(), 2u);
  ASSERT_NE(q.running_on("host-1"), nullptr);
  EXPECT_EQ(q.running_on("host-1")->prompt.prompt_id, "b");
  EXPECT_EQ(q.running_on("host-2"), nullptr);
  EXPECT_EQ(q.remaining(), 3u);
  EXPECT_EQ(q.queue_json()["queue_running"].size(), 2u);
}

TEST(fleet_queue, a_requeued_prompt_goes_back_to_its_own_place) {
  fleet_queue q;
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(q.put(prompt(q, id)));
  ASSERT_TRUE(q.take("a", "host-0"));
  q.running("a")->node_started = false;
  q.requeue("a");
  EXPECT_EQ(pending_ids(q), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(q.running().empty());
}

TEST(fleet_queue, delete_and_clear_touch_only_pending_prompts) {
  fleet_queue q;
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_TRUE(q.put(prompt(q, id)));
  ASSERT_TRUE(q.take("a", "host-0"));
  EXPECT_EQ(q.delete_pending({"a", "c"}), 1u);
  EXPECT_EQ(pending_ids(q), (std::vector<std::string>{"b", "d"}));
  q.clear_pending();
  EXPECT_TRUE(q.pending().empty());
  EXPECT_EQ(q.running().size(), 1u);
}

TEST(fleet_queue, every_change_says_how_many_remain) {
  fleet_queue q;
  std::vector<std::size_t> seen;
  q.on_change([&](std::size_t n) { seen.push_back(n); });
  EXPECT_TRUE(q.put(prompt(q, "a")));
  EXPECT_TRUE(q.put(prompt(q, "b")));
  ASSERT_TRUE(q.take("a", "host-0"));
  q.finish("a", json::object(), {{"status_str", "success"}}, json::object());
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 2, 2, 1}));
}

TEST(fleet_queue, a_finished_prompt_is_in_the_history_with_the_gateways_number_and_client) {
  fleet_queue q;
  EXPECT_TRUE(q.put(prompt(q, "x")));
  EXPECT_TRUE(q.put(prompt(q, "a", false, "alice")));
  ASSERT_TRUE(q.take("a", "host-2"));
  q.finish("a", {{"4", {{"images", json::array()}}}},
           {{"status_str", "success"}, {"completed", true}}, json::object(), {"4"});
  EXPECT_TRUE(q.running().empty());
  const json h = q.history_of("a");
  ASSERT_TRUE(h.contains("a"));
  EXPECT_EQ(h["a"]["prompt"][0], 1);
  EXPECT_EQ(h["a"]["prompt"][3]["client_id"], "alice");
  EXPECT_EQ(h["a"]["prompt"][4], json::array({"4"}));
  EXPECT_EQ(h["a"]["status"]["status_str"], "success");
  EXPECT_TRUE(h["a"]["outputs"].contains("4"));
  EXPECT_EQ(q.history_of("nope"), json::object());
}

TEST(fleet_queue, the_history_keeps_the_newest_entries_up_to_its_size) {
  fleet_queue q(2);
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_TRUE(q.put(prompt(q, id)));
    ASSERT_TRUE(q.take(id, "host-0"));
    q.finish(id, json::object(), json::object(), json::object());
  }
  const auto h = q.history(std::nullopt, -1);
  std::vector<std::string> ids;
  for (const auto& [id, _] : h.items()) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b", "c"}));
  const auto newest = q.history(1, -1);
  EXPECT_TRUE(newest.contains("c"));
  EXPECT_EQ(newest.size(), 1u);
  q.delete_history({"b"});
  EXPECT_EQ(q.history_size(), 1u);
  q.clear_history();
  EXPECT_EQ(q.history_size(), 0u);
}

TEST(fleet_queue, a_full_queue_says_why) {
  serve::queue_limits limits;
  limits.max_pending = 1;
  fleet_queue q(10, limits);
  EXPECT_FALSE(q.full_for(10).has_value());
  EXPECT_TRUE(q.put(prompt(q, "a")));
  ASSERT_TRUE(q.full_for(10).has_value());
  EXPECT_NE(q.full_for(10)->find("1 prompts are pending"), std::string::npos);
}

}  // namespace
}  // namespace orch::gateway
