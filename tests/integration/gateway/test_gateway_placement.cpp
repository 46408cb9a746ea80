// Placement through a live gateway (docs/fleet.md, "Placement"): the models a host loaded are in
// its view before the next prompt is placed, and `[gateway] placement = "round_robin"` gives the
// baseline placement is measured against.
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

json loader_prompt(const std::string& model) {
  return {{"1", {{"class_type", "TestCheckpointLoader"}, {"inputs", {{"ckpt_name", model}}}}}};
}

class placement_test : public gateway_test {
 protected:
  // The run decision of `prompt_id`, once it has ended at the gateway.
  json ran(const std::string& prompt_id) {
    EXPECT_EQ(finished_at_gateway(prompt_id)["status"]["status_str"], "success");
    const json fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& d : fleet_doc["decisions"])
      if (d["prompt_id"] == prompt_id && d["decision"] == "run") return d;
    ADD_FAILURE() << "no run decision for " << prompt_id << ": " << fleet_doc.dump();
    return json::object();
  }
};

TEST_F(placement_test, a_model_one_prompt_loaded_is_warm_for_the_next_prompt_at_once) {
  // The next prompt is queued as soon as the first is in the gateway's history: well within the
  // gateway's periodic check, so only the report read at the prompt's end can make it warm.
  for (const std::string model : {"a.safetensors", "b.safetensors", "c.safetensors"}) {
    const json first = ran(queue_at_gateway(loader_prompt(model), "c"));
    EXPECT_EQ(first["loads"], json::array({"checkpoints/" + model})) << first.dump();
    const json second = ran(queue_at_gateway(loader_prompt(model), "c"));
    EXPECT_EQ(second["host"], first["host"]) << second.dump();
    EXPECT_EQ(second["loads"], json::array()) << second.dump();
  }
}

TEST_F(placement_test, round_robin_takes_the_next_free_host_whatever_it_holds) {
  start_gateway(fleet_file(hosts_, "placement = \"round_robin\"\n"));
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 3; }));
  std::vector<std::string> hosts;
  for (int i = 0; i < 4; ++i)
    hosts.push_back(ran(queue_at_gateway(loader_prompt("a.safetensors"), "c"))["host"]);
  EXPECT_EQ(hosts, (std::vector<std::string>{"host-0", "host-1", "host-2", "host-0"}));
}

}  // namespace
}  // namespace orch::serve_testing
