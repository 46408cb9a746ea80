// `comfy-orch gateway`'s queue and routes in front of three real serve hosts (gateway_fixture.hpp):
// prompts placed across the hosts with each client's events relayed, the queue's front and
// delete, a class no host has, /object_info, /interrupt.
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

TEST_F(gateway_test, prompts_run_on_several_hosts_and_each_client_hears_its_own_in_order) {
  ws_client alice(gateway_->port(), "alice");
  ws_client bob(gateway_->port(), "bob");
  ASSERT_EQ(alice.next()->value("type", ""), "status");
  ASSERT_EQ(bob.next()->value("type", ""), "status");
  std::set<std::string> alices, bobs;
  for (int i = 0; i < 6; ++i) {
    const json p = i % 2 == 0 ? sleep_prompt(800) : quick_prompt;
    (i % 2 == 0 ? alices : bobs).insert(queue_at_gateway(p, i % 2 == 0 ? "alice" : "bob"));
  }
  const auto heard_by_alice = events_of(alice, alices);
  const auto heard_by_bob = events_of(bob, bobs);
  for (const auto& [heard, ids] :
       {std::pair{heard_by_alice, alices}, std::pair{heard_by_bob, bobs}}) {
    ASSERT_EQ(heard.size(), ids.size());
    for (const auto& id : ids) {
      ASSERT_TRUE(heard.count(id)) << id;
      const auto types = types_of(heard.at(id));
      EXPECT_EQ(types.front(), "execution_start") << id;
      EXPECT_EQ(types.back(), "executing") << id;
      EXPECT_NE(std::find(types.begin(), types.end(), "execution_success"), types.end()) << id;
    }
  }
  for (const auto& id : bobs) EXPECT_FALSE(heard_by_alice.count(id)) << "alice heard bob's " << id;
  std::set<std::string> hosts_used;
  for (const auto& ids : {alices, bobs})
    for (const auto& id : ids) {
      const json entry = finished_at_gateway(id);
      ASSERT_FALSE(entry.is_null()) << id;
      EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
      EXPECT_EQ(entry["prompt"][1], id);
      hosts_used.insert(host_of(id));
    }
  EXPECT_GE(hosts_used.size(), 2u)
      << "every prompt ran on one host: " << gateway_->get("/orch/fleet").body;
  EXPECT_EQ(gateway_->get("/history").json().size(), 6u);
}

TEST_F(gateway_test, the_queue_shows_running_prompts_and_front_and_delete_work_on_pending_ones) {
  std::vector<std::string> long_ones;
  for (int i = 0; i < 3; ++i) long_ones.push_back(queue_at_gateway(sleep_prompt(2500), "c"));
  // Each host runs one of the three: all three run, none waits.
  ASSERT_TRUE(wait_until([&] {
    const json q = gateway_->get("/queue").json();
    return q["queue_running"].size() == 3 && q["queue_pending"].empty();
  }));
  const std::string later = queue_at_gateway(quick_prompt, "c");
  const std::string doomed = queue_at_gateway(quick_prompt, "c");
  const std::string first = queue_at_gateway(quick_prompt, "c", {{"front", true}});
  json q = gateway_->get("/queue").json();
  ASSERT_EQ(q["queue_pending"].size(), 3u) << q.dump();
  EXPECT_EQ(q["queue_pending"][0][1], first);
  EXPECT_LT(q["queue_pending"][0][0].get<double>(), 0);
  EXPECT_EQ(q["queue_pending"][1][1], later);
  EXPECT_EQ(q["queue_pending"][2][1], doomed);
  EXPECT_EQ(gateway_->post("/queue", {{"delete", {doomed}}}).status, 200u);
  q = gateway_->get("/queue").json();
  ASSERT_EQ(q["queue_pending"].size(), 2u);
  EXPECT_EQ(q["queue_pending"][0][1], first);
  EXPECT_EQ(q["queue_pending"][1][1], later);
  for (const auto& id : {first, later}) EXPECT_FALSE(finished_at_gateway(id).is_null()) << id;
  for (const auto& id : long_ones) EXPECT_FALSE(finished_at_gateway(id).is_null()) << id;
  EXPECT_TRUE(gateway_history_of(doomed).is_null());
  EXPECT_TRUE(wait_until(
      [&] { return gateway_->get("/prompt").json()["exec_info"]["queue_remaining"] == 0; }));
}

TEST_F(gateway_test, a_prompt_naming_a_class_no_host_has_is_refused_naming_it) {
  const json p = {{"1", {{"class_type", "NoSuchNodeAnywhere"}, {"inputs", json::object()}}},
                  {"2", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}};
  const auto r = gateway_->post("/prompt", {{"prompt", p}, {"client_id", "c"}});
  EXPECT_EQ(r.status, 400u);
  const json body = r.json();
  EXPECT_EQ(body["error"]["type"], "missing_node_type");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("NoSuchNodeAnywhere"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(body["error"]["extra_info"]["orch_missing_classes"],
            json::array({"NoSuchNodeAnywhere"}));
  EXPECT_TRUE(body["node_errors"].is_object());
  EXPECT_EQ(gateway_->get("/prompt").json()["exec_info"]["queue_remaining"], 0);
}

// The gateway reads a prompt's fields as serve does (serve_request_fields.hpp): a prompt_id that
// is no canonical UUID, or one a waiting or running prompt has, is refused at once, and a number
// may be a string, as ComfyUI's float() takes it.
TEST_F(gateway_test, a_prompt_id_that_is_no_canonical_uuid_or_is_taken_is_refused_and_a_number_may_be_text) {
  const json p = {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}};
  const auto upper = gateway_->post(
      "/prompt", {{"prompt", p}, {"prompt_id", "6F9619FF-8B86-D011-B42D-00C04FC964FF"}});
  EXPECT_EQ(upper.status, 400u) << upper.body;
  EXPECT_EQ(upper.json()["error"]["type"], "invalid_prompt_id") << upper.body;
  const auto numbered = gateway_->post("/prompt", {{"prompt", p}, {"number", "7"}});
  EXPECT_EQ(numbered.status, 200u) << numbered.body;
  EXPECT_EQ(numbered.json()["number"], 7) << numbered.body;
  // One prompt_id names one prompt: a second prompt under the id of one that waits or runs would
  // have run that one again on another host.
  const std::string id = "6f9619ff-8b86-4011-b42d-00c04fc964ff";
  const json slow = {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 60000}}}}}};
  EXPECT_EQ(gateway_->post("/prompt", {{"prompt", slow}, {"prompt_id", id}}).status, 200u);
  const auto again = gateway_->post("/prompt", {{"prompt", p}, {"prompt_id", id}});
  EXPECT_EQ(again.status, 400u) << again.body;
  EXPECT_EQ(again.json()["error"]["type"], "invalid_prompt_id") << again.body;
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", id}}).status, 200u);
  // Nor one that ran: its host would refuse it (serve's prompt_id_known).
  ASSERT_FALSE(finished_at_gateway(id).is_null());
  const auto ran = gateway_->post("/prompt", {{"prompt", p}, {"prompt_id", id}});
  EXPECT_EQ(ran.status, 400u) << ran.body;
  EXPECT_EQ(ran.json()["error"]["type"], "invalid_prompt_id") << ran.body;
}

TEST_F(gateway_test, object_info_is_a_hosts_answer) {
  const auto all = gateway_->get("/object_info");
  ASSERT_EQ(all.status, 200u);
  EXPECT_TRUE(all.json().contains("TestSleep"));
  EXPECT_TRUE(all.json().contains("SolidImage"));
  const auto one = gateway_->get("/object_info/TestSleep");
  ASSERT_EQ(one.status, 200u);
  EXPECT_EQ(one.json().size(), 1u);
  EXPECT_TRUE(one.json().contains("TestSleep"));
}

TEST_F(gateway_test, interrupt_of_a_prompt_stops_it_on_its_host_and_leaves_the_others_running) {
  ws_client client(gateway_->port(), "i");
  const std::string slow = queue_at_gateway(sleep_prompt(60000), "i");
  const std::string other = queue_at_gateway(sleep_prompt(1500), "i");
  std::set<std::string> started;
  while (started.size() < 2) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "a prompt's node never started";
    if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_string())
      started.insert((*m)["data"]["prompt_id"].get<std::string>());
  }
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", "not-a-running-one"}}).status, 200u);
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", slow}}).status, 200u);
  const auto heard = events_of(client, {slow, other});
  ASSERT_TRUE(heard.count(slow));
  EXPECT_TRUE(serve_test::heard(heard.at(slow), "execution_interrupted"));
  ASSERT_TRUE(heard.count(other));
  EXPECT_TRUE(serve_test::heard(heard.at(other), "execution_success"));
  EXPECT_FALSE(serve_test::heard(heard.at(other), "execution_interrupted"));
  EXPECT_FALSE(finished_at_gateway(slow).is_null());
}

}  // namespace
}  // namespace orch::serve_testing
