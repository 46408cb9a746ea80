// Every route of a live `comfy-orch serve` answers in ComfyUI's shape (docs/serve.md, "Routes"),
// reads a prompt's fields as ComfyUI reads them, refuses what is not a prompt, and serves the
// frontend --front-end-root names and the workflow templates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../cli/command_runner.hpp"
#include "serve_fixture.hpp"
#include "wait_until.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, every_route_answers_in_comfyuis_shape) {
  auto s = serve();
  EXPECT_EQ(s->get("/prompt").json(), (json{{"exec_info", {{"queue_remaining", 0}}}}));
  EXPECT_EQ(s->get("/queue").json(), (json{{"queue_running", json::array()},
                                           {"queue_pending", json::array()}}));
  EXPECT_EQ(s->get("/history").json(), json::object());
  const json info = s->get("/object_info/ImageChecksum").json()["ImageChecksum"];
  for (const char* key : {"input", "input_order", "output", "output_is_list", "output_name",
                          "name", "display_name", "description", "python_module", "category",
                          "output_node"})
    EXPECT_TRUE(info.contains(key)) << key << " missing from " << info.dump();
  EXPECT_EQ(info["input"]["required"]["image"], json::array({"IMAGE"}));
  EXPECT_EQ(s->get("/object_info/NoSuchNode").json(), json::object());
  const json all = s->get("/object_info").json();
  for (const char* cls : {"SolidImage", "ImageChecksum", "SimSampler", "TestSleep"})
    EXPECT_TRUE(all.contains(cls)) << cls;
  const json stats = s->get("/system_stats").json();
  for (const char* key : {"os", "ram_total", "ram_free", "comfyui_version", "python_version",
                          "pytorch_version", "embedded_python", "argv"})
    EXPECT_TRUE(stats["system"].contains(key)) << key;
  // sys.platform's, and the Python and torch of the stack the workers run on (the host's).
  EXPECT_EQ(stats["system"]["os"], "linux");
  EXPECT_EQ(stats["system"]["python_version"].get<std::string>().rfind("3.", 0), 0u)
      << stats["system"];
  ASSERT_EQ(stats["devices"].size(), 1u);
  EXPECT_EQ(stats["devices"][0]["type"], "sim");
  EXPECT_GT(stats["devices"][0]["vram_total"].get<std::uint64_t>(), 0u);  // the workers' pager view
  EXPECT_EQ(worker_pids(*s).size(), 3u);

  const std::string id = queue(*s, quick_prompt);
  const json h = finished(*s, id);
  ASSERT_FALSE(h.is_null());
  EXPECT_EQ(h["prompt"][0], 0);
  EXPECT_EQ(h["prompt"][1], id);
  EXPECT_EQ(h["prompt"][2], quick_prompt);
  EXPECT_EQ(h["prompt"][4], json::array({"4"}));
  EXPECT_EQ(h["status"]["status_str"], "success");
  EXPECT_TRUE(h["status"]["completed"].get<bool>());
  EXPECT_TRUE(h["outputs"].contains("4")) << h.dump();
  EXPECT_EQ(s->get("/history?max_items=1").json().size(), 1u);

  EXPECT_EQ(s->post("/history", {{"delete", {id}}}).status, 200u);
  EXPECT_TRUE(history_of(*s, id).is_null());
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);  // nothing runs: a no-op
  EXPECT_EQ(s->post("/free", {{"unload_models", true}}).status, 200u);
  EXPECT_EQ(s->get("/nowhere").status, 404u);
  EXPECT_EQ(s->get("/api/queue").json(), s->get("/queue").json());  // ComfyUI's /api prefix
  EXPECT_EQ(s->call(orch::testing::http::verb::delete_, "/prompt").status, 405u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, bodies_that_are_not_prompts_get_comfyuis_errors_and_change_nothing) {
  auto s = serve();
  const auto refused = [&](const std::string& body, const std::string& type) {
    const auto r = s->call(orch::testing::http::verb::post, "/prompt", body);
    EXPECT_EQ(r.status, 400u) << body;
    const json j = r.json();
    EXPECT_EQ(j["error"]["type"], type) << body << " -> " << r.body;
    EXPECT_TRUE(j["node_errors"].is_object()) << r.body;
  };
  refused("not json", "invalid_prompt");
  refused("[1, 2]", "invalid_prompt");
  refused("{}", "no_prompt");
  refused(R"({"prompt": {"1": {"inputs": {}}}})", "missing_node_type");
  refused(R"({"prompt": {"1": {"class_type": "NoSuchNode", "inputs": {}}}})",
          "missing_node_type");
  refused(R"({"prompt": {"1": {"class_type": "SolidImage", "inputs": {"value": 1e999}}}})",
          "invalid_prompt");
  refused(R"({"prompt": )" + std::string(100000, '[') + "}", "invalid_prompt");
  EXPECT_EQ(s->get("/queue").json()["queue_pending"].size(), 0u);
  EXPECT_EQ(s->get("/history").json(), json::object());
  EXPECT_EQ(s->stop(), 0);
}

// --front-end-root serves another build of the frontend, as ComfyUI's flag does, and a
// directory without index.html stops serve at start with the reason; the pack web directories
// and the API stay where they are.
TEST_F(serve_test, front_end_root_serves_another_frontend_and_refuses_a_directory_without_one) {
  const std::filesystem::path root = dir_ / "my-frontend";
  std::filesystem::create_directories(root / "assets");
  std::ofstream(root / "index.html") << "<!doctype html><title>mine</title>";
  std::ofstream(root / "assets" / "app.js") << "console.log('mine')";
  auto s = serve({"--front-end-root", root.string()});
  ASSERT_NE(s->port(), 0);
  const auto page = s->get("/");
  EXPECT_EQ(page.status, 200u);
  EXPECT_EQ(page.body, "<!doctype html><title>mine</title>");
  EXPECT_EQ(page.header("cache-control"), "no-cache");
  const auto script = s->get("/assets/app.js");
  EXPECT_EQ(script.header("content-type"), "application/javascript; charset=utf-8");
  EXPECT_EQ(s->get("/assets/../../deployment.toml").status, 404u);
  EXPECT_EQ(s->get("/api/users").json()["storage"], "server");
  EXPECT_EQ(s->stop(), 0);

  const auto refused = orch::testing::run_command(
      std::string(ORCH_TEST_COMFY_ORCH) + " serve '" + write_deployment({}).string() +
      "' --port 0 --no-control-socket --front-end-root '" + dir_.string() + "'");
  EXPECT_EQ(refused.exit_code, 1) << refused.err;  // an invalid input, before anything starts
  EXPECT_NE(refused.err.find("holds no index.html"), std::string::npos) << refused.err;
}

// The template browser, the first page a new user sees (issue 57): the official templates
// scripts/install-deps unpacked into .deps/templates (the pinned comfyui-workflow-templates
// parts) at /templates/, and a pack's example workflows listed and served as ComfyUI does.
TEST_F(serve_test, the_template_browser_gets_the_official_templates_and_the_packs_examples) {
  auto s = serve();
  ASSERT_NE(s->port(), 0);
  const auto index = s->get("/templates/index.json");
  ASSERT_EQ(index.status, 200u) << "no workflow templates: run scripts/install-deps";
  EXPECT_EQ(index.header("content-type"), "application/json");
  const json categories = index.json();
  ASSERT_TRUE(categories.is_array() && !categories.empty()) << index.body.substr(0, 200);
  const json& first = categories[0]["templates"][0];
  ASSERT_TRUE(first.contains("name")) << categories[0].dump().substr(0, 400);
  const auto workflow = s->get("/templates/" + first["name"].get<std::string>() + ".json");
  EXPECT_EQ(workflow.status, 200u);
  EXPECT_TRUE(workflow.json().contains("nodes")) << workflow.body.substr(0, 200);
  EXPECT_EQ(s->get("/templates/index.fr.json").json().size(), categories.size());
  EXPECT_EQ(s->get("/templates/no-such-template-1.webp").status, 404u);
  EXPECT_EQ(s->get("/templates/../deployment.toml").status, 404u);

  EXPECT_EQ(s->get("/api/workflow_templates").json(), json::object());
  const auto examples = dir_ / "packs/ComfyUI-TestNodes/example_workflows";
  std::filesystem::create_directories(examples);
  std::ofstream(examples / "demo.json") << R"({"nodes": []})";
  std::ofstream(examples / "demo.jpg") << "jpg";
  EXPECT_EQ(s->get("/api/workflow_templates").json(), (json{{"ComfyUI-TestNodes", {"demo"}}}));
  EXPECT_EQ(s->get("/workflow_templates").json(), (json{{"ComfyUI-TestNodes", {"demo"}}}));
  const auto demo = s->get("/api/workflow_templates/ComfyUI-TestNodes/demo.json");
  EXPECT_EQ(demo.status, 200u);
  EXPECT_EQ(demo.body, R"({"nodes": []})");
  const auto thumbnail = s->get("/api/workflow_templates/ComfyUI-TestNodes/demo.jpg");
  EXPECT_EQ(thumbnail.header("content-type"), "image/jpeg");
  EXPECT_EQ(s->get("/api/workflow_templates/ComfyUI-TestNodes/none.json").status, 404u);
  EXPECT_EQ(s->stop(), 0);
}

// ComfyUI reads number with float() and front and the other flags as Python truth values; a
// prompt_id must be a UUID in canonical form (validate_job_id, Comfy-Org/ComfyUI 002c3fb9).
TEST_F(serve_test, number_front_and_prompt_id_are_read_as_comfyui_reads_them) {
  auto s = serve();
  const auto sent = [&](json extra) {
    extra["prompt"] = quick_prompt;
    return s->post("/prompt", extra);
  };
  const std::string id = "0b5d1c2e-7f3a-4c1b-9e2d-1a2b3c4d5e6f";
  auto r = sent({{"number", "7"}, {"prompt_id", id}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json()["number"], 7);
  EXPECT_EQ(r.json()["prompt_id"], id);
  // An id it holds or ran is refused, not run twice (a gateway's second POST of a prompt).
  r = sent({{"prompt_id", id}});
  ASSERT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.json()["error"]["type"], "prompt_id_known") << r.body;
  for (const json& bad : {json(42), json("not-a-uuid"),
                          json("0B5D1C2E-7F3A-4C1B-9E2D-1A2B3C4D5E6F"), json("{" + id + "}")}) {
    r = sent({{"prompt_id", bad}});
    ASSERT_EQ(r.status, 400u) << bad.dump();
    EXPECT_EQ(r.json()["error"]["type"], "invalid_prompt_id") << r.body;
  }
  ASSERT_EQ(sent(json::object()).status, 200u);  // the counter passes 0, whose negation is 0
  r = sent({{"front", 1}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_LT(r.json()["number"].get<double>(), 0);
  r = sent({{"front", ""}, {"prompt_id", nullptr}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_GE(r.json()["number"].get<double>(), 0);
  EXPECT_EQ(r.json()["prompt_id"].get<std::string>().size(), 36u);  // a new UUID
  EXPECT_EQ(sent({{"number", "seven"}}).status, 400u);
  EXPECT_EQ(sent({{"prompt_id", {1, 2}}}).status, 400u);
  // ComfyUI records when a prompt was queued (ms) and the Comfy-Usage-Source header.
  r = s->send(http::verb::post, "/prompt", json{{"prompt", quick_prompt}}.dump(),
              "application/json", false, {{"Comfy-Usage-Source", "browser-test"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  const std::string sourced = r.json()["prompt_id"];
  const json extra = finished(*s, sourced)["prompt"][3];
  EXPECT_EQ(extra.value("comfy_usage_source", ""), "browser-test") << extra;
  EXPECT_GT(extra.value("create_time", std::int64_t{0}), std::int64_t{1700000000000}) << extra;
  // The counter's numbers stay integers in the queue and the history (they had become 3.0).
  json h;
  ASSERT_TRUE(wait_until([&] {
    h = s->get("/history").json();
    bool all_integers = h.size() >= 5;
    for (const auto& [_, entry] : h.items())
      all_integers = all_integers && entry["prompt"][0].is_number_integer();
    return all_integers;
  })) << h.dump();
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
