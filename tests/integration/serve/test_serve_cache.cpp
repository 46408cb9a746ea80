// The execution cache across prompts of a live `comfy-orch serve` (docs/serve.md, "The execution
// cache"): a rerun runs only what changed, /free drops it, and `cache = "none"` keeps nothing.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

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

}  // namespace
