// `comfy-orch serve` as a ComfyUI client meets it (docs/serve.md): a real server process over
// real workers, driven with a Boost.Beast client, a Python client written as ComfyUI's own
// script examples are, and attacks from outside (oversized bodies, slow headers, too many
// clients, a worker killed mid-prompt). The runtime fixture checks after every test that no fd,
// /dev/shm entry or process is left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>

#include "../cli/command_runner.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, a_client_written_as_comfyuis_script_examples_runs_a_prompt_end_to_end) {
  const auto r = orch::testing::run_command(
      std::string("/usr/bin/python3 '") + ORCH_TEST_SERVE_CLIENT + "' '" + ORCH_TEST_COMFY_ORCH +
      "' '" + write_deployment().string() + "' '" + ORCH_TEST_EXAMPLE_PROMPT + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok:"), std::string::npos) << r.out;
}

// Two ComfyUI clients nobody here wrote, from npm at the versions package-lock.json pins
// (scripts/install-deps runs npm ci): each queues `prompt_file`, follows it over the
// WebSocket, waits as the library does and reads the history.
void run_npm_client(serve_process& s, const std::string& which, const std::string& prompt_file) {
  ASSERT_TRUE(std::filesystem::exists(std::string(ORCH_TEST_NPM_CLIENTS) + "/node_modules"))
      << "the npm clients are not installed: run ./scripts/install-deps";
  const auto r = orch::testing::run_command(
      "node '" + std::string(ORCH_TEST_NPM_CLIENTS) + "/clients.mjs' 127.0.0.1:" +
      std::to_string(s.port()) + " '" + prompt_file + "' " + which);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: " + which), std::string::npos) << r.out << r.err;
  EXPECT_EQ(s.stop(), 0);
}

// Both libraries start listening for a prompt's events only once its POST has been answered
// (the SDK, for progress, even after it has read the history): the example's four steps were
// over before that once a served prompt took a millisecond, and the client waited for events
// already sent. Real samplers take seconds; the example's sampler here takes 20 steps of 25 ms.
std::string long_sampler_prompt(const std::filesystem::path& dir) {
  json prompt;
  std::ifstream(ORCH_TEST_EXAMPLE_PROMPT) >> prompt;
  prompt["3"]["inputs"]["steps"] = 20;
  prompt["3"]["inputs"]["step_ms"] = 25;
  const auto file = dir / "long-sampler.json";
  std::ofstream(file) << prompt.dump();
  return file.string();
}

TEST_F(serve_test, the_stable_canvas_client_from_npm_runs_a_prompt_end_to_end) {
  const auto prompt = long_sampler_prompt(write_deployment().parent_path());
  auto s = serve();
  run_npm_client(*s, "stable-canvas", prompt);
}

TEST_F(serve_test, the_saintno_sdk_from_npm_runs_a_prompt_end_to_end) {
  const auto prompt = long_sampler_prompt(write_deployment().parent_path());
  auto s = serve();
  run_npm_client(*s, "saintno", prompt);
}

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
  for (int i = 0; i < 500 && history_of(*s, id).is_null(); ++i) std::this_thread::sleep_for(10ms);
  const json h = history_of(*s, id);
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
  for (int i = 0; i < 500 && history_of(*s, sourced).is_null(); ++i)
    std::this_thread::sleep_for(10ms);
  const json extra = history_of(*s, sourced)["prompt"][3];
  EXPECT_EQ(extra.value("comfy_usage_source", ""), "browser-test") << extra;
  EXPECT_GT(extra.value("create_time", std::int64_t{0}), std::int64_t{1700000000000}) << extra;
  // The counter's numbers stay integers in the queue and the history (they had become 3.0).
  for (int i = 0; i < 200; ++i) {
    const json h = s->get("/history").json();
    bool all_integers = h.size() >= 5;
    for (const auto& [_, entry] : h.items())
      all_integers = all_integers && entry["prompt"][0].is_number_integer();
    if (all_integers) break;
    ASSERT_LT(i, 199) << h.dump();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(s->stop(), 0);
}

json sampler_prompt(int steps) {
  return {{"1", {{"class_type", "SolidImage"},
                 {"inputs", {{"width", 16}, {"height", 8}, {"value", 0.5}}}}},
          {"2", {{"class_type", "SimLoadModel"}, {"inputs", {{"size_mib", 8}, {"layers", 2}}}}},
          {"3", {{"class_type", "SimSampler"},
                 {"inputs", {{"model", {"2", 0}}, {"latent", {"1", 0}}, {"steps", steps}}}}},
          {"4", {{"class_type", "ImageChecksum"}, {"inputs", {{"image", {"3", 0}}}}}}};
}

// The messages of one prompt by type, and the nodes that ran (`executing` with a node).
struct prompt_messages {
  std::map<std::string, std::vector<json>> by_type;
  std::vector<std::string> ran;
};

prompt_messages follow(ws_client& ws, const std::string& id) {
  prompt_messages m;
  for (const auto& msg : ws.until_prompt_end(id)) {
    m.by_type[msg["type"]].push_back(msg["data"]);
    if (msg["type"] == "executing" && msg["data"]["node"].is_string())
      m.ran.push_back(msg["data"]["node"]);
  }
  return m;
}

TEST_F(serve_test, a_rerun_with_a_changed_input_reruns_only_what_depends_on_it) {
  auto s = serve();
  ws_client ws(s->port(), "cache-client");
  ASSERT_TRUE(ws.next());
  auto first = follow(ws, queue(*s, sampler_prompt(4), "cache-client"));
  EXPECT_EQ(first.ran, (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(first.by_type["execution_cached"].at(0)["nodes"], json::array());
  // executed: only the node that returned UI, with that UI (ComfyUI's "text").
  ASSERT_EQ(first.by_type["executed"].size(), 1u);
  const json ui = first.by_type["executed"][0]["output"];
  EXPECT_EQ(first.by_type["executed"][0]["node"], "4");
  ASSERT_TRUE(ui.contains("text")) << ui.dump();
  EXPECT_EQ(ui["text"].at(0).get<std::string>().rfind("checksum ", 0), 0u) << ui.dump();

  const std::string again_id = queue(*s, sampler_prompt(4), "cache-client");
  auto again = follow(ws, again_id);
  EXPECT_TRUE(again.ran.empty()) << json(again.ran).dump();
  EXPECT_EQ(again.by_type["execution_cached"].at(0)["nodes"], json::array({"1", "2", "3", "4"}));
  ASSERT_EQ(again.by_type["executed"].size(), 1u);
  EXPECT_EQ(again.by_type["executed"][0]["output"], ui) << "a cached output node's UI again";
  EXPECT_EQ(history_of(*s, again_id)["outputs"]["4"], ui);

  auto reseeded = follow(ws, queue(*s, sampler_prompt(5), "cache-client"));
  EXPECT_EQ(reseeded.by_type["execution_cached"].at(0)["nodes"], json::array({"1", "2"}));
  EXPECT_EQ(reseeded.ran, (std::vector<std::string>{"3", "4"}));

  // /free with free_memory drops the cache (no prompt runs, so at once).
  const auto freed = s->post("/free", {{"free_memory", true}});
  ASSERT_EQ(freed.status, 200u) << freed.body;
  EXPECT_EQ(freed.json()["orch_cache"]["dropped_nodes"], 4);
  EXPECT_EQ(freed.json()["orch_cache"]["deferred"], false);
  auto after_free = follow(ws, queue(*s, sampler_prompt(5), "cache-client"));
  EXPECT_EQ(after_free.ran, (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, cache_none_runs_every_node_every_time) {
  orch::runtime_testing::deployment_options o;
  o.server = "cache = \"none\"\n";
  auto s = serve({}, o);
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  follow(ws, queue(*s, sampler_prompt(4), "c"));
  auto again = follow(ws, queue(*s, sampler_prompt(4), "c"));
  EXPECT_EQ(again.ran, (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(again.by_type["execution_cached"].at(0)["nodes"], json::array());
  EXPECT_EQ(s->stop(), 0);
}

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

TEST_F(serve_test, interrupt_stops_the_running_prompt_and_the_queue_goes_on) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  const std::string next = queue(*s, quick_prompt, "c");
  wait_inside_the_running_node(*s);
  EXPECT_EQ(s->post("/interrupt", {{"prompt_id", "not-the-running-one"}}).status, 200u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(s->get("/queue").json()["queue_running"][0][1], slow);  // still running
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  ws.until_prompt_end(next);
  EXPECT_EQ(history_of(*s, slow)["status"]["status_str"], "error");
  EXPECT_EQ(history_of(*s, next)["status"]["status_str"], "success");
  EXPECT_EQ(s->stop(), 0);
}

// ComfyUI's jobs API (002c3fb9), which the frontend's queue and history panels read: the list
// by status, one job in detail, and cancel, which dequeues a pending job, interrupts the running
// one and leaves a finished one alone.
TEST_F(serve_test, the_jobs_api_lists_details_and_cancels_pending_and_running_jobs) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  const std::string pending = queue(*s, quick_prompt, "c");
  wait_inside_the_running_node(*s);
  const json active = s->get("/api/jobs?status=in_progress,pending").json();
  ASSERT_EQ(active["jobs"].size(), 2u) << active;
  std::map<std::string, std::string> status;
  for (const auto& j : active["jobs"]) status[j["id"]] = j["status"];
  EXPECT_EQ(status[slow], "in_progress");
  EXPECT_EQ(status[pending], "pending");
  EXPECT_EQ(active["pagination"]["total"], 2);
  const json detail = s->get("/api/jobs/" + pending).json();
  EXPECT_EQ(detail["status"], "pending");
  EXPECT_EQ(detail["workflow"]["prompt"], quick_prompt);
  EXPECT_GT(detail["create_time"].get<std::int64_t>(), 0);
  EXPECT_EQ(s->post("/api/jobs/" + pending + "/cancel", json::object()).json(),
            json({{"cancelled", true}}));
  EXPECT_TRUE(s->get("/queue").json()["queue_pending"].empty());
  const auto invalid = s->post("/api/jobs/cancel", {{"job_ids", {"not-a-uuid"}}});
  EXPECT_EQ(invalid.status, 400u);
  EXPECT_EQ(invalid.json()["invalid_ids"], json({"not-a-uuid"}));
  EXPECT_EQ(s->post("/api/jobs/cancel", {{"job_ids", {slow}}}).json(),
            json({{"cancelled", true}}));
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  EXPECT_EQ(s->get("/api/jobs/" + slow).json()["status"], "cancelled");
  const json cancelled = s->get("/api/jobs?status=cancelled").json();
  ASSERT_EQ(cancelled["jobs"].size(), 1u) << cancelled;
  EXPECT_EQ(cancelled["jobs"][0]["id"], slow);
  EXPECT_EQ(s->post("/api/jobs/" + slow + "/cancel", json::object()).json(),
            json({{"cancelled", false}}));  // finished: a no-op
  EXPECT_EQ(s->get("/api/jobs/0b5d1c2e-7f3a-4c1b-9e2d-1a2b3c4d5e6f").status, 404u);
  EXPECT_EQ(s->get("/api/jobs?limit=0").status, 400u);
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

// A /free waits for the workers' receipts, which a worker gives after its running node: the
// API thread waits with it. /interrupt is answered on the io thread, not queued behind it (it
// waited there for the node's whole 60 s, and then found nothing left to interrupt).
TEST_F(serve_test, interrupt_is_not_queued_behind_a_request_that_waits_for_a_worker) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  // A prompt whose class validates in its worker: the API thread waits on that busy worker
  // (/free no longer does: the busy worker is asked, not waited for).
  std::thread waiting([&] {
    EXPECT_EQ(s->post("/prompt", checked_prompt).status, 200u);
  });
  std::this_thread::sleep_for(200ms);  // the API thread waits on the validation
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  waiting.join();
  EXPECT_EQ(history_of(*s, slow)["status"]["status_str"], "error");
  EXPECT_EQ(s->stop(), 0);
}

// POST /prompt is answered on the io thread too (no node of it has a worker-side
// VALIDATE_INPUTS): a client can queue while a /free waits for a running node's receipts. On
// the API thread it waited behind the /free for the whole node.
TEST_F(serve_test, a_prompt_is_queued_while_a_request_waits_for_a_worker) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  std::atomic<bool> validated{false};
  std::thread waiting([&] {  // validates in the busy worker: the API thread waits
    EXPECT_EQ(s->post("/prompt", checked_prompt).status, 200u);
    validated = true;
  });
  std::this_thread::sleep_for(200ms);  // the API thread waits on the validation
  const std::string next = queue(*s, sleep_prompt(0), "c");
  EXPECT_FALSE(validated.load()) << "the POST was answered only after the validation";
  // GET /prompt, as the io thread answers it (GET /queue waits behind the validation).
  EXPECT_EQ(s->get("/prompt").json()["exec_info"]["queue_remaining"], 2);
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  EXPECT_TRUE(heard(ws.until_prompt_end(next), "execution_success"));
  waiting.join();
  EXPECT_EQ(history_of(*s, next)["status"]["status_str"], "success");
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, a_worker_killed_during_a_prompt_fails_that_prompt_and_the_next_three_run) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const auto pids = worker_pids(*s);
  const std::string doomed = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  const std::string test_env = s->get("/object_info/TestSleep").json()["TestSleep"]["orch_env"];
  ASSERT_EQ(::kill(pids.at(test_env), SIGKILL), 0);
  EXPECT_TRUE(heard(ws.until_prompt_end(doomed), "execution_error"))
      << "the client did not hear the failure";
  EXPECT_EQ(history_of(*s, doomed)["status"]["status_str"], "error");
  for (int n = 0; n < 3; ++n) {
    const std::string id = queue(*s, sleep_prompt(1 + n), "c");  // distinct: none is cached
    ws.until_prompt_end(id);
    EXPECT_EQ(history_of(*s, id)["status"]["status_str"], "success") << "prompt " << n;
  }
  EXPECT_NE(worker_pids(*s).at(test_env), pids.at(test_env));  // it was respawned
  EXPECT_EQ(s->stop(), 0);
}

// GET /orch/status (docs/cli.md, "status"): every process, read from the control segment.
TEST_F(serve_test, orch_status_shows_every_process_and_a_replaced_worker_live) {
  auto s = serve();
  auto status = [&] { return s->get("/orch/status").json(); };
  auto entry = [](const json& doc, const std::string& process) {
    for (const auto& e : doc["processes"])
      if (e["process"] == process) return e;
    return json();
  };
  const json before = status();
  ASSERT_EQ(before["processes"].size(), 4u) << before.dump(2);  // the host and three workers
  const json host = entry(before, "host");
  EXPECT_EQ(host["mode"], "host");
  EXPECT_EQ(host["device"], "sim");
  EXPECT_EQ(host["free_view"], "device");
  EXPECT_EQ(host["manager"], "pager");
  EXPECT_GT(host["device_total_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(host["plugins"][0]["slot"], "pager");
  EXPECT_EQ(host["applied_settings"]["streams"], "2");
  EXPECT_GT(before["budget_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_GT(before["physical_ram_bytes"].get<std::uint64_t>(), 0u);
  const std::string test_env = s->get("/object_info/TestSleep").json()["TestSleep"]["orch_env"];
  const json worker = entry(before, test_env);
  EXPECT_EQ(worker["mode"], "worker");
  EXPECT_EQ(worker["state"], "ready");
  EXPECT_EQ(worker["restarts"], 0);
  EXPECT_TRUE(worker["settings_match"].get<bool>());
  EXPECT_FALSE(worker["applied_settings"].empty()) << worker.dump(2);
  EXPECT_EQ(worker["applied_settings"], worker["expected_settings"]);
  EXPECT_EQ(worker["plugins"].size(), 3u) << "pager, allocator and backend: " << worker.dump(2);

  const std::string id = queue(*s, sleep_prompt(1));
  for (int i = 0; i < 500 && history_of(*s, id).is_null(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(entry(status(), test_env)["calls"].get<int>(), 1);

  ASSERT_EQ(::kill(worker["pid"].get<pid_t>(), SIGKILL), 0);
  json replaced;
  for (int i = 0; i < 500; ++i, std::this_thread::sleep_for(10ms)) {
    replaced = entry(status(), test_env);
    if (replaced["state"] == "ready" && replaced["pid"] != worker["pid"]) break;
  }
  EXPECT_EQ(replaced["state"], "ready") << replaced.dump(2);
  EXPECT_EQ(replaced["restarts"], 1);
  EXPECT_GT(replaced["generation"].get<int>(), worker["generation"].get<int>());
  EXPECT_NE(replaced.value("last_error", ""), "");
  EXPECT_EQ(s->post("/orch/status", json::object()).status, 405u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, sigterm_interrupts_the_running_prompt_and_stops_every_worker) {
  auto s = serve();
  const auto pids = worker_pids(*s);
  queue(*s, sleep_prompt(60000));
  for (int i = 0; i < 500 && s->get("/queue").json()["queue_running"].empty(); ++i)
    std::this_thread::sleep_for(10ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(s->stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  for (const auto& [env, pid] : pids)
    EXPECT_TRUE(orch::runtime_testing::process_gone(pid)) << env << " worker left running";
}

// GET /view and POST /upload/image (docs/serve.md "Files"): the deployment's input/, output/ and
// temp/ beside its file, made by serve at start.
// Bytes no text codec survives: every byte value, CRLFs, and the boundary's own dashes.
std::string binary_image() {
  std::string png = "\x89PNG\r\n\x1a\n";
  for (int round = 0; round < 64; ++round)
    for (int b = 0; b < 256; ++b) png.push_back(static_cast<char>(b));
  return png + "\r\n--" + form_boundary.substr(0, 10) + "\r\n";
}

TEST_F(serve_test, an_uploaded_image_is_viewed_back_byte_for_byte) {
  auto s = serve();
  for (const char* d : {"input", "output", "temp"})
    EXPECT_TRUE(std::filesystem::is_directory(dir_ / d)) << d << " was not made at start";
  const std::string png = binary_image();
  auto r = upload(*s, "x.png", png);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "x.png"}, {"subfolder", ""}, {"type", "input"}}));
  EXPECT_EQ(orch::testing::slurp(dir_ / "input/x.png"), png);
  const auto v = s->get("/view?filename=x.png&type=input");
  ASSERT_EQ(v.status, 200u) << v.body;
  EXPECT_TRUE(v.body == png) << "the viewed bytes differ from the uploaded ones";
  EXPECT_EQ(v.header("content-type"), "image/png");
  EXPECT_EQ(v.header("content-disposition"), "filename=\"x.png\"");
  // Into a new subfolder of the output directory, viewed under /api with the default type.
  r = upload(*s, "y.png", png, {{"subfolder", "a/b"}, {"type", "output"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "y.png"}, {"subfolder", "a/b"}, {"type", "output"}}));
  EXPECT_TRUE(s->get("/api/view?filename=y.png&subfolder=a%2Fb").body == png);
  EXPECT_EQ(upload(*s, "t.json", "{}", {{"type", "temp"}}).status, 200u);
  const auto t = s->get("/view?filename=t.json&type=temp");
  EXPECT_EQ(t.body, "{}");
  EXPECT_EQ(t.header("content-type"), "application/json");
  EXPECT_EQ(s->get("/view?filename=nothing.png").status, 404u);
  EXPECT_EQ(s->get("/view").status, 400u);
  EXPECT_EQ(s->get("/view?filename=x.png&type=models").status, 400u);
  EXPECT_EQ(s->call(orch::testing::http::verb::post, "/view").status, 405u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, an_upload_under_a_taken_name_is_renamed_unless_it_overwrites) {
  auto s = serve();
  const auto name = [&](const std::string& bytes, const std::string& overwrite) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (!overwrite.empty()) fields.emplace_back("overwrite", overwrite);
    const auto r = upload(*s, "x.png", bytes, fields);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.json().value("name", "");
  };
  EXPECT_EQ(name("one", ""), "x.png");
  EXPECT_EQ(name("two", ""), "x (1).png");
  EXPECT_EQ(name("one", ""), "x.png");  // the same bytes again: ComfyUI's duplicate check
  EXPECT_EQ(name("three", "true"), "x.png");
  EXPECT_EQ(name("four", "1"), "x.png");
  EXPECT_EQ(s->get("/view?filename=x.png&type=input").body, "four");
  EXPECT_EQ(s->get("/view?filename=x%20(1).png&type=input").body, "two");
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, no_request_reaches_outside_the_input_and_output_directories) {
  auto s = serve();
  write(dir_ / "secret.txt", "secret");
  std::filesystem::create_symlink(dir_ / "secret.txt", dir_ / "output/link.txt");
  std::filesystem::create_symlink(dir_, dir_ / "output/up");
  std::filesystem::create_symlink(dir_, dir_ / "input/up");
  // A bad file name: 400 (ComfyUI's), also percent-encoded.
  for (const char* target :
       {"/view?filename=../secret.txt", "/view?filename=..%2Fsecret.txt",
        "/view?filename=%2e%2e%2fsecret.txt", "/view?filename=%2Fetc%2Fpasswd",
        "/view?filename=/etc/passwd", "/view?filename=secret.txt%00.png",
        "/api/view?filename=%2E%2E/secret.txt&type=input"})
    EXPECT_EQ(s->get(target).status, 400u) << target;
  // A subfolder that leaves the directory, or a symlink anywhere: 403.
  for (const char* target :
       {"/view?filename=secret.txt&subfolder=..", "/view?filename=secret.txt&subfolder=%2e%2e",
        "/view?filename=passwd&subfolder=/etc", "/view?filename=passwd&subfolder=%2Fetc",
        "/view?filename=link.txt", "/view?filename=secret.txt&subfolder=up",
        "/view?filename=secret.txt&subfolder=up&type=input"})
    EXPECT_EQ(s->get(target).status, 403u) << target;
  EXPECT_EQ(upload(*s, "../evil.png", "x").status, 400u);
  EXPECT_EQ(upload(*s, "/tmp/evil.png", "x").status, 400u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", ".."}}).status, 403u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", "up"}}).status, 403u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", "/tmp"}}).status, 403u);
  EXPECT_EQ(s->send(orch::testing::http::verb::post, "/upload/image", "x", "text/plain").status,
            400u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "evil.png"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/evil.png"));
  EXPECT_EQ(orch::testing::slurp(dir_ / "secret.txt"), "secret");
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// The body's cap is chosen from the route once the header is read: an upload may be 64 MiB, a
// prompt 8 MiB. A refused body gets a 413 the client reads (not a reset), and the server goes on.
TEST_F(serve_test, an_upload_has_a_64_mib_cap_while_a_prompt_keeps_8_mib) {
  auto s = serve();
  std::string big(std::size_t{60} << 20, '\0');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i >> 12);
  const auto r = upload(*s, "big.bin", big);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(std::filesystem::file_size(dir_ / "input/big.bin"), big.size());
  const auto v = s->get("/view?filename=big.bin&type=input");
  EXPECT_EQ(v.header("content-type"), "application/octet-stream");
  EXPECT_TRUE(v.body == big) << "the viewed file differs (" << v.body.size() << " bytes)";

  const json prompt = {{"prompt", quick_prompt}, {"pad", std::string(std::size_t{9} << 20, 'x')}};
  const auto refused = s->post("/prompt", prompt);
  EXPECT_EQ(refused.status, 413u) << refused.body;
  EXPECT_NE(refused.body.find("8388608"), std::string::npos) << refused.body;
  const auto chunked =
      s->send(orch::testing::http::verb::post, "/prompt", prompt.dump(), "application/json", true);
  EXPECT_EQ(chunked.status, 413u) << chunked.body;
  // An upload whose Content-Length is past 64 MiB is refused from its header alone, before the
  // client sent any of the body (as curl stops sending when the answer comes first).
  {
    boost::asio::io_context io;
    orch::testing::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    boost::asio::write(sock, boost::asio::buffer("POST /upload/image HTTP/1.1\r\nHost: x\r\n"
                                                 "Content-Type: " + form_type +
                                                 "\r\nContent-Length: " +
                                                 std::to_string((std::size_t{64} << 20) + 1) +
                                                 "\r\n\r\n"));
    std::string answer(512, '\0');
    boost::system::error_code ec;
    answer.resize(sock.read_some(boost::asio::buffer(answer), ec));
    EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
    EXPECT_NE(answer.find("67108864"), std::string::npos) << answer;
  }
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(upload(*s, "small.png", "small").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// curl, as people test ComfyUI's upload: it sends `Expect: 100-continue` before a body past
// 1 MiB and waits for the server's go-ahead.
TEST_F(serve_test, curl_uploads_an_image_and_downloads_it_back) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "no /usr/bin/curl";
  auto s = serve();
  std::string bytes = binary_image();
  while (bytes.size() < (std::size_t{2} << 20)) bytes += bytes;
  write(dir_ / "local.png", bytes);
  const std::string url = "http://127.0.0.1:" + std::to_string(s->port());
  const auto up = orch::testing::run_command(
      "/usr/bin/curl -sS -v -F 'image=@" + (dir_ / "local.png").string() +
      "' -F overwrite=true -F subfolder=curl " + url + "/upload/image");
  EXPECT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(json::parse(up.out),
            (json{{"name", "local.png"}, {"subfolder", "curl"}, {"type", "input"}}));
  EXPECT_NE(up.err.find("HTTP/1.1 100 Continue"), std::string::npos) << up.err;
  const auto down = orch::testing::run_command(
      "/usr/bin/curl -sS -D - -o '" + (dir_ / "back.png").string() + "' '" + url +
      "/view?filename=local.png&subfolder=curl&type=input'");
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_NE(down.out.find("filename=\"local.png\""), std::string::npos) << down.out;
  EXPECT_TRUE(orch::testing::slurp(dir_ / "back.png") == bytes);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, serve_stops_at_start_with_the_reason_when_it_cannot_make_a_directory) {
  const auto file = write_deployment();
  write(dir_ / "blocker", "a file, not a directory");
  std::ofstream(file, std::ios::app) << "\n[server]\noutput_directory = \"blocker/output\"\n";
  const auto r = orch::testing::run_command(std::string(ORCH_TEST_COMFY_ORCH) + " serve '" +
                                            file.string() + "' --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot create the output directory " + (dir_ / "blocker/output").string()),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fix:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

}  // namespace

namespace {


// 8 clients queue 25 prompts each while WebSocket clients come and go: every prompt ends in the
// history (200 entries), none is lost or run twice, and the server's memory comes back to where
// it was (within 10 MiB) once the load is over.
TEST_F(serve_test, eight_clients_queueing_25_prompts_each_lose_nothing) {
  auto s = serve();
  // Warm: the first prompts map the pool and load the workers' code.
  for (int i = 0; i < 5; ++i) queue(*s, quick_prompt);
  for (int i = 0; i < 1000 && s->get("/prompt").json()["exec_info"]["queue_remaining"] != 0; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(s->post("/history", {{"clear", true}}).status, 200u);
  const std::uint64_t before = rss_kib(s->pid());

  std::atomic<bool> stop{false};
  std::thread churn([&] {  // WebSocket clients that connect, read their greeting and leave
    for (int n = 0; !stop; ++n) {
      try {
        ws_client c(s->port(), "churn-" + std::to_string(n % 16));
        c.next(200ms);
      } catch (const std::exception&) {
        // refused past the cap: fine, the server must only stay up
      }
    }
  });
  std::mutex mutex;
  std::set<std::string> ids;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        // Each prompt its own: every one runs, and the cache turns over under the load.
        json p = quick_prompt;
        p["1"]["inputs"]["value"] = (c * 25 + i) / 1000.0;
        const std::string id = queue(*s, p, "client-" + std::to_string(c));
        std::lock_guard lock(mutex);
        ids.insert(id);
      }
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 6000 && s->get("/prompt").json()["exec_info"]["queue_remaining"] != 0; ++i)
    std::this_thread::sleep_for(10ms);
  stop = true;
  churn.join();

  EXPECT_EQ(ids.size(), 200u);  // 200 distinct prompt ids
  const json history = s->get("/history").json();
  EXPECT_EQ(history.size(), 200u);
  int succeeded = 0;
  for (const auto& id : ids) {
    ASSERT_TRUE(history.contains(id)) << id << " is not in the history";
    const std::string st = history[id]["status"]["status_str"];
    if (st == "success") ++succeeded;
    else EXPECT_FALSE(history[id]["status"]["messages"].empty()) << id << " failed without its error";
  }
  EXPECT_EQ(succeeded, 200);
  ASSERT_EQ(s->post("/history", {{"clear", true}}).status, 200u);
  const std::uint64_t after = rss_kib(s->pid());
#ifndef ORCH_TEST_SANITIZED  // ASan's quarantine keeps what was freed: RSS says nothing there
  EXPECT_LT(after, before + 10 * 1024) << "RSS " << before << " KiB before, " << after << " after";
#endif
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
