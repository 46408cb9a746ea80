// serve's prompt queue (orchestrator/serve/include/orch/serve/serve_queue.hpp) against ComfyUI's PromptQueue
// semantics: lowest number first, `front` before everything queued, ties in arrival order,
// deletes that spare the running prompt, and a history capped oldest-first with ComfyUI's
// max_items/offset reading.
#include <gtest/gtest.h>

#include "orch/serve/serve_queue.hpp"

namespace {

using orch::serve::prompt_queue;
using orch::serve::queued_prompt;

queued_prompt item(const std::string& id, double number) {
  queued_prompt p;
  p.prompt_id = id;
  p.number = number;
  return p;
}

std::string take_id(prompt_queue& q) {
  auto p = q.try_take();
  return p ? p->prompt_id : std::string("<none>");
}

// A gateway sends a prompt again when its first POST went unanswered (docs/fleet.md, "A prompt in
// doubt"): an id that waits, runs or ran is refused, so it runs once.
TEST(serve_queue, put_new_refuses_an_id_pending_running_or_in_the_history) {
  prompt_queue q;
  EXPECT_TRUE(q.put_new(item("a", 0)));
  EXPECT_FALSE(q.put_new(item("a", 1)));  // pending
  EXPECT_EQ(take_id(q), "a");
  EXPECT_FALSE(q.put_new(item("a", 2)));  // running
  q.finish({}, {});
  EXPECT_FALSE(q.put_new(item("a", 3)));  // in the history
  EXPECT_TRUE(q.put_new(item("b", 4)));
  EXPECT_EQ(q.remaining(), 1u);
  q.delete_history({"a"});
  EXPECT_TRUE(q.put_new(item("a", 5)));  // no longer known
}

TEST(serve_queue, runs_the_lowest_number_first_front_first_and_ties_in_arrival_order) {
  prompt_queue q;
  q.put(item("a", q.next_number(false)));  // 0
  q.put(item("b", q.next_number(false)));  // 1
  q.put(item("front", q.next_number(true)));  // -2
  q.put(item("tie-1", 5));
  q.put(item("tie-2", 5));
  EXPECT_EQ(q.remaining(), 5u);
  EXPECT_EQ(take_id(q), "front");
  q.finish({}, {});
  for (const char* want : {"a", "b", "tie-1", "tie-2"}) {
    EXPECT_EQ(take_id(q), want);
    q.finish({}, {});
  }
  EXPECT_EQ(q.remaining(), 0u);
}

TEST(serve_queue, clear_and_delete_leave_the_running_prompt_alone) {
  prompt_queue q;
  for (const char* id : {"run", "x", "y", "z"}) q.put(item(id, q.next_number(false)));
  EXPECT_EQ(take_id(q), "run");
  q.delete_pending({"run", "y"});
  const auto texts = q.texts();
  ASSERT_EQ(texts.running.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(*texts.running[0])[1], "run");
  ASSERT_EQ(texts.pending.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(*texts.pending[0])[1], "x");
  q.clear_pending();
  EXPECT_EQ(q.remaining(), 1u);
  EXPECT_EQ(q.running_id(), "run");
}

TEST(serve_queue, history_is_capped_oldest_first_and_read_as_comfyui_reads_it) {
  prompt_queue q(3);
  for (int i = 0; i < 5; ++i) {
    q.put(item("p" + std::to_string(i), i));
    take_id(q);
    q.finish({{"1", {{"images", nlohmann::json::array()}}}}, {{"status_str", "success"}});
  }
  EXPECT_EQ(q.history_size(), 3u);
  EXPECT_TRUE(q.history_of("p1").empty());
  EXPECT_EQ(q.history_of("p4")["p4"]["prompt"][1], "p4");
  EXPECT_TRUE(q.history_of("p4")["p4"]["meta"].contains("1"));
  const auto newest = q.history(1, -1);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_TRUE(newest.contains("p4"));
  const auto from_start = q.history(2, 0);
  EXPECT_TRUE(from_start.contains("p2"));
  EXPECT_TRUE(from_start.contains("p3"));
  q.delete_history({"p3"});
  EXPECT_EQ(q.history_size(), 2u);
  q.clear_history();
  EXPECT_TRUE(q.history(std::nullopt, -1).empty());
}

// A count cap alone let 10000 entries of large prompts or `ui` outputs hold gigabytes: the history
// also has a byte cap (each entry twice its JSON text), oldest first, and the
// newest entry stays whatever its size.
TEST(serve_queue, history_is_capped_in_bytes_oldest_first_keeping_the_newest) {
  orch::serve::queue_limits limits;
  limits.max_history_bytes = 5000;
  prompt_queue q(100, limits);
  const nlohmann::json outputs = {{"1", {{"text", std::string(900, 'x')}}}};  // ~920 bytes
  for (const char* id : {"p1", "p2", "p3", "p4"}) {
    auto p = item(id, q.next_number(false));
    p.bytes = 100;
    q.put(std::move(p));
    ASSERT_EQ(take_id(q), id);
    q.finish(outputs, {});
  }
  EXPECT_EQ(q.history_size(), 2u);  // two of ~2040 bytes (twice ~1020 of text) fit in 5000, three do not
  EXPECT_TRUE(q.history_of("p2").empty());
  EXPECT_FALSE(q.history_of("p4").empty());
  q.delete_history({"p4"});  // what is deleted is given back
  auto p = item("p5", q.next_number(false));
  p.bytes = 100;
  q.put(std::move(p));
  ASSERT_EQ(take_id(q), "p5");
  q.finish(outputs, {});
  EXPECT_EQ(q.history_size(), 2u);  // p3 and p5
  q.put(item("huge", q.next_number(false)));
  ASSERT_EQ(take_id(q), "huge");
  q.finish({{"1", {{"text", std::string(10000, 'x')}}}}, {});
  EXPECT_EQ(q.history_size(), 1u);
  EXPECT_FALSE(q.history_of("huge").empty());
}

// ComfyUI's history is a dict in insertion order; ids that sort the other way must keep it.
TEST(serve_queue, history_keeps_the_order_prompts_finished_in) {
  prompt_queue q;
  for (const char* id : {"zz", "aa", "mm"}) {
    q.put(item(id, q.next_number(false)));
    take_id(q);
    q.finish({}, {});
  }
  std::vector<std::string> keys;
  const auto history = q.history(std::nullopt, -1);  // not the items of a temporary
  for (const auto& [k, _] : history.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"zz", "aa", "mm"}));
}

TEST(serve_queue, nothing_is_taken_when_none_is_pending_or_once_stopped) {
  prompt_queue q;
  EXPECT_FALSE(q.try_take().has_value());
  q.put(item("a", 0));
  q.put(item("b", 1));
  EXPECT_EQ(take_id(q), "a");
  q.finish({}, {});
  q.stop();
  EXPECT_FALSE(q.try_take().has_value());
}

TEST(serve_queue, every_change_reports_what_remains) {
  prompt_queue q;
  std::vector<std::size_t> seen;
  q.on_change([&](std::size_t n) { seen.push_back(n); });
  q.put(item("a", 0));
  take_id(q);
  q.finish({}, {});
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 1, 0}));
}

}  // namespace
