// The official frontend's routes at the gateway, /free, /system_stats and the jobs API, in front
// of three real serve hosts (gateway_fixture.hpp; docs/fleet.md, "The frontend at the gateway"):
// the user's data and settings kept at the gateway, the packs' web files and example workflows
// answered by a host, every host freed and its devices listed, every prompt of the fleet a job.
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

using orch::testing::reply;

// A pack of the hosts' deployment with a web directory (its __init__.py's WEB_DIRECTORY, as
// ComfyUI reads it) and an example workflow, written before the hosts start.
class gateway_frontend_test : public gateway_test {
 protected:
  void before_hosts() override {
    const fs::path pack = dir_ / "packs/ComfyUI-TestNodes";
    write(pack / "__init__.py", "WEB_DIRECTORY = \"./web\"\n");
    write(pack / "web/fleet_widget.js", fleet_script);
    write(pack / "web/lib/helper.js", "export const helper = 1;\n");
    write(pack / "example_workflows/fleet_demo.json", "{\"nodes\": []}\n");
  }
  reply at_host(std::size_t i, http::verb method, const std::string& target,
                const std::string& body = {}) const {
    return orch::testing::request(hosts_[i]->port(), method, target, body, "application/json",
                                  false, {{"Authorization", "Bearer " + fleet_secret}});
  }
  static inline const std::string fleet_script = "console.log('from the fleet's pack');\n";
};

TEST_F(gateway_frontend_test, the_users_settings_and_data_are_kept_at_the_gateway) {
  // Its own user directory, not the hosts' (which is dir_/user, beside their deployment).
  start_gateway(fleet_file(hosts_, "user_directory = \"gateway-user\"\n"));
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 3; }));
  EXPECT_EQ(gateway_->post("/api/settings/Comfy.Graph.ZoomSpeed", 1.3).status, 200u);
  EXPECT_EQ(gateway_->get("/api/settings/Comfy.Graph.ZoomSpeed").json(), 1.3);
  EXPECT_EQ(gateway_->get("/settings").json()["Comfy.Graph.ZoomSpeed"], 1.3);
  const fs::path settings = dir_ / "gateway-user/default/comfy.settings.json";
  ASSERT_TRUE(fs::exists(settings));
  EXPECT_EQ(json::parse(std::ifstream(settings))["Comfy.Graph.ZoomSpeed"], 1.3);
  EXPECT_TRUE(at_host(0, http::verb::get, "/settings/Comfy.Graph.ZoomSpeed").json().is_null());

  const auto saved = orch::testing::request(gateway_->port(), http::verb::post,
                                            "/api/userdata/workflows%2Ffleet.json",
                                            "{\"nodes\": [1]}");
  EXPECT_EQ(saved.status, 200u) << saved.body;
  EXPECT_EQ(gateway_->get("/api/userdata/workflows%2Ffleet.json").json()["nodes"][0], 1);
  EXPECT_EQ(gateway_->get("/api/userdata?dir=workflows").json(), json::array({"fleet.json"}));
  EXPECT_TRUE(fs::exists(dir_ / "gateway-user/default/workflows/fleet.json"));
  EXPECT_EQ(gateway_->get("/api/users").json()["storage"], "server");

  // The frontend's own files and the "none here" routes, as serve answers them.
  const auto page = gateway_->get("/");
  EXPECT_EQ(page.status, 200u);
  EXPECT_EQ(page.header("content-type").rfind("text/html", 0), 0u) << page.header("content-type");
  const json features = gateway_->get("/api/features").json();
  EXPECT_TRUE(features.contains("max_upload_size")) << features.dump();
  EXPECT_EQ(gateway_->get("/api/i18n").json(), json::object());
  EXPECT_EQ(gateway_->get("/api/embeddings").json(), json::array());
}

TEST_F(gateway_frontend_test, extensions_list_the_packs_web_files_as_serve_does_and_serve_them) {
  const json at_gateway = gateway_->get("/api/extensions").json();
  const json host_list = at_host(1, http::verb::get, "/extensions").json();
  ASSERT_TRUE(at_gateway.is_array()) << at_gateway.dump();
  // The same list as a host's (the gateway's frontend is the hosts': the same install).
  std::set<std::string> gateway_set(at_gateway.begin(), at_gateway.end());
  std::set<std::string> host_set(host_list.begin(), host_list.end());
  EXPECT_EQ(gateway_set, host_set);
  EXPECT_EQ(gateway_set.count("/extensions/ComfyUI-TestNodes/fleet_widget.js"), 1u)
      << at_gateway.dump();
  EXPECT_EQ(gateway_set.count("/extensions/ComfyUI-TestNodes/lib/helper.js"), 1u);
  const auto script = gateway_->get("/extensions/ComfyUI-TestNodes/fleet_widget.js");
  EXPECT_EQ(script.status, 200u);
  EXPECT_EQ(script.body, fleet_script);
  EXPECT_NE(script.header("content-type").find("javascript"), std::string::npos)
      << script.header("content-type");
  EXPECT_EQ(gateway_->get("/extensions/ComfyUI-TestNodes/none.js").status, 404u);
  EXPECT_EQ(gateway_->get("/extensions/ComfyUI-TestNodes/..%2F__init__.py").status, 404u);
  // The frontend's own core extensions, from the gateway's frontend.
  for (const auto& url : at_gateway)
    if (url.get<std::string>().rfind("/extensions/core/", 0) == 0) {
      EXPECT_EQ(gateway_->get(url.get<std::string>()).status, 200u) << url;
      break;
    }
  // The packs' example workflows, from a host.
  EXPECT_EQ(gateway_->get("/api/workflow_templates").json()["ComfyUI-TestNodes"],
            json::array({"fleet_demo"}));
  EXPECT_EQ(gateway_->get("/api/workflow_templates/ComfyUI-TestNodes/fleet_demo.json").json(),
            json::parse("{\"nodes\": []}"));
}

TEST_F(gateway_frontend_test, free_reaches_every_host) {
  // One prompt on each host, which each host's cache then holds.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(queue_at_gateway(sleep_prompt(1500 + i), "c"));
  std::set<std::string> hosts_used;
  for (const auto& id : ids) {
    ASSERT_FALSE(finished_at_gateway(id).is_null()) << id;
    hosts_used.insert(host_of(id));
  }
  ASSERT_EQ(hosts_used.size(), 3u) << gateway_->get("/orch/fleet").body;
  const auto freed = gateway_->post("/free", {{"free_memory", true}, {"unload_models", true}});
  ASSERT_EQ(freed.status, 200u) << freed.body;
  for (const std::string name : {"host-0", "host-1", "host-2"})
    EXPECT_EQ(freed.json()["orch_hosts"][name]["orch_cache"]["dropped_nodes"], 1)
        << freed.body;
  // At each host: its cache was dropped by the gateway's /free, nothing is left to drop.
  for (std::size_t i = 0; i < 3; ++i) {
    const auto again = at_host(i, http::verb::post, "/free", "{\"free_memory\": true}");
    ASSERT_EQ(again.status, 200u) << again.body;
    EXPECT_EQ(again.json()["orch_cache"]["dropped_nodes"], 0) << i << ": " << again.body;
  }
  EXPECT_EQ(gateway_->post("/free", json::array()).status, 400u);
}

TEST_F(gateway_frontend_test, system_stats_lists_every_hosts_devices) {
  const json stats = gateway_->get("/api/system_stats").json();
  ASSERT_EQ(stats["devices"].size(), 3u) << stats.dump();
  std::set<std::string> hosts;
  for (const auto& d : stats["devices"]) {
    const std::string host = d["orch_host"];
    hosts.insert(host);
    EXPECT_EQ(d["name"].get<std::string>().rfind(host + ": ", 0), 0u) << d.dump();
    EXPECT_TRUE(d["vram_total"].is_number()) << d.dump();
    EXPECT_EQ(d["type"], "sim") << d.dump();
  }
  EXPECT_EQ(hosts, (std::set<std::string>{"host-0", "host-1", "host-2"}));
  EXPECT_EQ(stats["system"]["argv"][1], "gateway");
  EXPECT_GT(stats["system"]["ram_total"].get<std::uint64_t>(), 0u);
  EXPECT_NE(stats["system"]["comfyui_version"].get<std::string>().find("comfy-orch"),
            std::string::npos);
}

TEST_F(gateway_frontend_test, the_websocket_answers_feature_flags_as_serve_does) {
  ws_client client(gateway_->port(), "flags");
  const auto status = client.next();
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["type"], "status");
  EXPECT_EQ((*status)["data"]["sid"], "flags");
  client.send({{"type", "feature_flags"}, {"data", {{"supports_preview_metadata", true}}}});
  const auto flags = client.next();
  ASSERT_TRUE(flags);
  EXPECT_EQ((*flags)["type"], "feature_flags");
  EXPECT_EQ((*flags)["data"], gateway_->get("/features").json());
}

TEST_F(gateway_frontend_test, a_client_that_connects_mid_prompt_is_greeted_with_its_running_node) {
  const std::string id = queue_at_gateway(sleep_prompt(60000), "back");
  ASSERT_TRUE(wait_until([&] {
    const json fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& h : fleet_doc["hosts"])
      if (h["running"] == id && h["running_node_started"].get<bool>()) return true;
    return false;
  }));
  ws_client client(gateway_->port(), "back");
  EXPECT_EQ(client.next()->value("type", ""), "status");
  const auto running = client.next();
  ASSERT_TRUE(running);
  EXPECT_EQ((*running)["type"], "executing") << running->dump();
  EXPECT_EQ((*running)["data"]["node"], "1") << running->dump();
  EXPECT_EQ((*running)["data"]["prompt_id"], id) << running->dump();
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", id}}).status, 200u);
  EXPECT_FALSE(finished_at_gateway(id).is_null());
}

TEST_F(gateway_frontend_test, the_jobs_api_shows_running_pending_and_finished_prompts) {
  const std::string done = queue_at_gateway(quick_prompt, "c");
  ASSERT_FALSE(finished_at_gateway(done).is_null());
  // Prompts that run until they are interrupted at the end (a minute is a hang guard's length).
  std::vector<std::string> running;
  for (int i = 0; i < 3; ++i) running.push_back(queue_at_gateway(sleep_prompt(60000 + i), "c"));
  ASSERT_TRUE(wait_until([&] {
    return gateway_->get("/queue").json()["queue_running"].size() == 3;
  }));
  const std::string waiting = queue_at_gateway(sleep_prompt(10), "c");
  const json page = gateway_->get("/api/jobs").json();
  std::map<std::string, std::string> status_of;
  for (const auto& j : page["jobs"]) status_of[j["id"]] = j["status"];
  EXPECT_EQ(page["pagination"]["total"], 5) << page.dump();
  EXPECT_EQ(status_of[done], "completed") << page.dump();
  for (const auto& id : running) EXPECT_EQ(status_of[id], "in_progress") << page.dump();
  EXPECT_EQ(status_of[waiting], "pending") << page.dump();
  const json pending_only = gateway_->get("/api/jobs?status=pending").json();
  ASSERT_EQ(pending_only["jobs"].size(), 1u);
  EXPECT_EQ(pending_only["jobs"][0]["id"], waiting);

  const json one = gateway_->get("/api/jobs/" + running[0]).json();
  EXPECT_EQ(one["status"], "in_progress");
  EXPECT_EQ(one["id"], running[0]);
  const json finished = gateway_->get("/api/jobs/" + done).json();
  EXPECT_EQ(finished["status"], "completed") << finished.dump();
  EXPECT_TRUE(finished["outputs"].is_object()) << finished.dump();
  EXPECT_EQ(gateway_->get("/api/jobs/00000000-0000-4000-8000-000000000000").status, 404u);
  EXPECT_EQ(gateway_->get("/api/jobs?sort_by=nothing").status, 400u);
  // ComfyUI registers them under /api only.
  EXPECT_EQ(gateway_->get("/jobs").status, 404u);

  // Cancelling: the pending one leaves the queue, a running one is interrupted on its host.
  EXPECT_EQ(gateway_->post("/api/jobs/" + waiting + "/cancel", json::object()).json()["cancelled"],
            true);
  EXPECT_TRUE(gateway_->get("/queue").json()["queue_pending"].empty());
  EXPECT_EQ(gateway_->post("/api/jobs/cancel", {{"job_ids", {running[1]}}}).json()["cancelled"],
            true);
  const json interrupted = finished_at_gateway(running[1]);
  EXPECT_EQ(interrupted["status"]["status_str"], "error") << interrupted.dump();
  EXPECT_EQ(gateway_->get("/api/jobs/" + running[1]).json()["status"], "cancelled");
  EXPECT_EQ(gateway_->post("/interrupt", json::object()).status, 200u);
  for (const auto& id : running) EXPECT_FALSE(finished_at_gateway(id).is_null()) << id;
}

}  // namespace
}  // namespace orch::serve_testing
