// The WebSocket of a live `comfy-orch serve` (docs/serve.md, "Routes", GET /ws): a prompt's events
// to the client that queued it and the status to all, feature_flags answered, and a client that
// reconnects mid-prompt told the running node.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, events_go_to_the_client_that_queued_the_prompt_and_status_to_all) {
  auto s = serve();
  ws_client mine(s->port(), "client-a");
  ws_client other(s->port(), "client-b");
  const auto hello = mine.next();
  ASSERT_TRUE(hello);
  EXPECT_EQ((*hello)["type"], "status");
  EXPECT_EQ((*hello)["data"]["sid"], "client-a");
  EXPECT_EQ((*hello)["data"]["status"]["exec_info"]["queue_remaining"], 0);
  ASSERT_TRUE(other.next());  // its own greeting

  const std::string id = queue(*s, quick_prompt, "client-a");
  const auto seen = mine.until_prompt_end(id);
  std::vector<std::string> types;
  for (const auto& m : seen) types.push_back(m["type"]);
  auto at = [&](const std::string& t) {
    return std::find(types.begin(), types.end(), t) - types.begin();
  };
  ASSERT_LT(at("execution_start"), static_cast<long>(types.size())) << json(types).dump();
  EXPECT_LT(at("execution_start"), at("execution_cached"));
  EXPECT_LT(at("execution_cached"), at("executing"));
  EXPECT_LT(at("executed"), at("execution_success"));
  EXPECT_EQ(types.back(), "executing");
  // The other client hears the queue change, never the prompt's own events.
  std::set<std::string> heard;
  while (auto m = other.next(500ms)) heard.insert((*m)["type"].get<std::string>());
  EXPECT_EQ(heard, std::set<std::string>{"status"});
  EXPECT_EQ(s->stop(), 0);
}

// The frontend's WebSocket is /ws or /api/ws; its first message, feature_flags, is answered with
// the server's flags, once.
TEST_F(serve_test, a_clients_feature_flags_are_answered_with_the_servers_once) {
  auto s = serve();
  ws_client ws(s->port(), "flags", "", "/api/ws");
  ASSERT_TRUE(ws.next());  // status
  ws.send({{"type", "feature_flags"}, {"data", {{"supports_preview_metadata", true}}}});
  const auto reply = ws.next(10s);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ((*reply)["type"], "feature_flags");
  EXPECT_EQ((*reply)["data"]["supports_preview_metadata"], true);  // a worker node's previews
  EXPECT_GT((*reply)["data"]["max_upload_size"].get<std::uint64_t>(), 0u);
  ws.send({{"type", "feature_flags"}, {"data", json::object()}});
  EXPECT_FALSE(ws.next(300ms).has_value());
  EXPECT_EQ(s->stop(), 0);
}

// ComfyUI greets a client that reconnects while its prompt runs with the running node.
TEST_F(serve_test, a_client_that_reconnects_mid_prompt_is_told_the_running_node) {
  auto s = serve();
  std::string slow;
  {
    ws_client first(s->port(), "again");
    ASSERT_TRUE(first.next());
    slow = queue(*s, sleep_prompt(60000), "again");
    for (auto m = first.next(); m; m = first.next())
      if ((*m)["type"] == "executing" && (*m)["data"]["node"] == "1") break;
  }
  ws_client other(s->port(), "someone-else");
  const auto greeting = other.next();
  ASSERT_TRUE(greeting);
  EXPECT_EQ((*greeting)["type"], "status");
  EXPECT_FALSE(other.next(300ms)) << "another client's prompt's node was sent to it";
  ws_client again(s->port(), "again");
  const auto status = again.next();
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["type"], "status");
  EXPECT_EQ((*status)["data"]["sid"], "again");
  const auto executing = again.next();
  ASSERT_TRUE(executing);
  EXPECT_EQ((*executing)["type"], "executing") << executing->dump();
  EXPECT_EQ((*executing)["data"]["node"], "1");
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  again.until_prompt_end(slow);
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
