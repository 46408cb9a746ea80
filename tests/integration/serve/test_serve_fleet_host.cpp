// GET /orch/fleet/host of a live `comfy-orch serve` (docs/serve.md; docs/fleet.md, "What a host
// reports"): what a fleet's gateway reads of a host, in the form its parser takes.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "orch/fleet/host_report.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

// The report, read as the gateway reads it (a failed read fails the test, naming the field).
orch::fleet::host_report fleet_host(const serve_process& s) {
  const auto r = s.get("/orch/fleet/host");
  EXPECT_EQ(r.status, 200u) << r.body;
  auto reading = orch::fleet::parse_host_report(r.body);
  EXPECT_TRUE(reading.report) << reading.error << "\n" << r.body;
  return reading.report.value_or(orch::fleet::host_report{});
}

TEST_F(serve_test, fleet_host_names_the_object_info_classes_and_an_idle_queue) {
  auto s = serve({"--fleet-host-name", "gpu-7"});
  const auto report = fleet_host(*s);
  EXPECT_EQ(report.view.name, "gpu-7");
  std::set<std::string> object_info;
  const json classes = s->get("/object_info").json();  // not a range over a temporary
  for (const auto& [name, _] : classes.items()) object_info.insert(name);
  EXPECT_FALSE(object_info.empty());
  EXPECT_EQ(report.view.node_classes, object_info);
  EXPECT_FALSE(report.view.running);
  EXPECT_EQ(report.view.queued, 0u);
  EXPECT_TRUE(report.view.resident_models.empty());
  const auto stats = s->get("/system_stats").json();
  EXPECT_EQ(report.view.free_device_bytes, stats["devices"][0]["vram_free"].get<std::uint64_t>());
  // Its parts: comfy-orch's version, the deployment, and one per env of the three packs.
  EXPECT_EQ(report.parts.count("comfy-orch"), 1u);
  EXPECT_EQ(report.parts.count("deployment"), 1u);
  EXPECT_EQ(report.parts.size(), 5u) << s->get("/orch/fleet/host").body;
  EXPECT_EQ(s->get("/api/orch/fleet/host").status, 200u);
}

TEST_F(serve_test, fleet_host_fingerprint_is_one_deployments_whatever_the_process_or_name) {
  auto a = serve({"--fleet-host-name", "a"});
  auto b = serve({"--fleet-host-name", "b"});
  const auto ra = fleet_host(*a);
  const auto rb = fleet_host(*b);
  EXPECT_EQ(ra.view.fingerprint, rb.view.fingerprint);
  EXPECT_EQ(ra.parts, rb.parts);
  EXPECT_EQ(orch::fleet::fingerprint_difference(ra.parts, rb.parts).rfind("no part differs", 0),
            0u);
}

TEST_F(serve_test, fleet_host_fingerprint_changes_with_a_packs_manifest_and_names_its_env) {
  auto before = serve();
  const auto r1 = fleet_host(*before);
  before->stop();
  orch::runtime_testing::deployment_options changed;
  changed.test_pack_env = "ANOTHER_VAR = \"1\"\n";
  auto after = serve({}, changed);
  const auto r2 = fleet_host(*after);
  EXPECT_NE(r1.view.fingerprint, r2.view.fingerprint);
  std::set<std::string> differ;
  for (const auto& [part, value] : r1.parts)
    if (r2.parts.at(part) != value) differ.insert(part);
  ASSERT_EQ(differ.size(), 1u) << orch::fleet::fingerprint_difference(r1.parts, r2.parts);
  const std::string env = *differ.begin();
  EXPECT_EQ(env.rfind("env:", 0), 0u) << env;
  EXPECT_NE(orch::fleet::fingerprint_difference(r1.parts, r2.parts)
                .find("env " + env.substr(4) + ": sha256:"),
            std::string::npos);
}

TEST_F(serve_test, fleet_host_shows_a_loaded_model_by_the_file_its_loader_was_asked_for) {
  auto s = serve();
  EXPECT_TRUE(fleet_host(*s).view.resident_models.empty());
  const json prompt = {
      {"1",
       {{"class_type", "TestCheckpointLoader"}, {"inputs", {{"ckpt_name", "sd15.safetensors"}}}}}};
  const auto id = queue(*s, prompt);
  EXPECT_EQ(finished(*s, id)["status"]["status_str"], "success");
  EXPECT_EQ(fleet_host(*s).view.resident_models,
            (std::set<std::string>{"checkpoints/sd15.safetensors"}));
}

TEST_F(serve_test, fleet_host_says_a_prompt_runs_and_how_many_wait) {
  auto s = serve();
  queue(*s, sleep_prompt(60'000));
  wait_until_one_runs(*s);
  queue(*s, sleep_prompt(60'001));
  queue(*s, sleep_prompt(60'002));
  const auto report = fleet_host(*s);
  EXPECT_TRUE(report.view.running);
  EXPECT_EQ(report.view.queued, 2u);
  EXPECT_EQ(s->post("/queue", json{{"clear", true}}).status, 200u);
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  wait_until_idle(*s);
  const auto idle = fleet_host(*s);
  EXPECT_FALSE(idle.view.running);
  EXPECT_EQ(idle.view.queued, 0u);
}

}  // namespace
