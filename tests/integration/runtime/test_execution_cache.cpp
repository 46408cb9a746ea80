// The execution cache across prompts on real workers (executor with ComfyUI's classic policy):
// a re-run is served without a node call and its tensors stay leased in the pool, a changed input
// re-runs only what depends on it, IS_CHANGED is asked of the worker, clear_cache() (/free)
// gives the leases back, and a worker lost since an entry was kept takes the entry with it.
#include <csignal>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

class execution_cache_test : public runtime_test {
 protected:
  void start_cached() {
    ASSERT_NO_FATAL_FAILURE(start());
    executor_ =
        std::make_unique<executor::executor>(*host_, events_, manifests::cache_policy::classic, 1);
  }
  static std::string blob_prompt(int mib) {
    return json{{"1", {{"class_type", "TestBlob"}, {"inputs", {{"mib", mib}}}}},
                {"2", {{"class_type", "TestBlobPeek"}, {"inputs", {{"blob", {"1", 0}}}}}}}
        .dump();
  }
  std::size_t live_blocks() {
    return host_->on_io_thread([&] { return host_->memory().leases().live_blocks(); });
  }
  // The events of the last prompt of type `type`.
  std::vector<json> last(const std::string& type) {
    std::vector<json> out;
    for (const auto& e : events_.events()) {
      if (e["type"] == "execution_start") out.clear();
      if (e["type"] == type) out.push_back(e["data"]);
    }
    return out;
  }
};

TEST_F(execution_cache_test, a_rerun_is_served_from_the_cache_with_its_tensor_still_leased) {
  ASSERT_NO_FATAL_FAILURE(start_cached());
  auto first = run(blob_prompt(1));
  ASSERT_TRUE(first.ok) << first.error->dump();
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array());
  EXPECT_EQ(last("executing").size(), 3u);  // 1, 2 and the end
  EXPECT_EQ(live_blocks(), 1u);             // the blob, kept by the cache

  auto again = run(blob_prompt(1));
  ASSERT_TRUE(again.ok) << again.error->dump();
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array({"1", "2"}));
  ASSERT_EQ(last("executing").size(), 1u) << "no node ran, only the prompt's end";
  EXPECT_TRUE(last("executing")[0]["node"].is_null());
  // The cached output node's UI again: it returned none, so null (ComfyUI's own shape).
  ASSERT_EQ(last("executed").size(), 1u);
  EXPECT_EQ(last("executed")[0]["node"], "2");
  EXPECT_TRUE(last("executed")[0]["output"].is_null());
  EXPECT_TRUE(again.nodes.at("1").cached);
  EXPECT_EQ(again.nodes.at("2").outputs, first.nodes.at("2").outputs);
  EXPECT_EQ(live_blocks(), 1u);

  // The tensor input is the cached block itself: a consumer that is not cached reads it.
  auto peek_changed = run(
      json{{"1", {{"class_type", "TestBlob"}, {"inputs", {{"mib", 1}}}}},
           {"3", {{"class_type", "TestBlobPeek"}, {"inputs", {{"blob", {"1", 0}}}}}},
           {"4", {{"class_type", "TestEmpty"}, {"inputs", json::object()}}}}
          .dump());
  ASSERT_TRUE(peek_changed.ok) << peek_changed.error->dump();
  // Node 3 has node 2's signature (the ids are no part of it), node 4 is new.
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array({"1", "3"}));
  EXPECT_EQ(peek_changed.nodes.at("3").outputs.at(0), 16);  // 7 + 9, read from the pool

  EXPECT_EQ(executor_->clear_cache(), std::optional<std::size_t>(3));
  executor_->release_outputs();
  EXPECT_EQ(live_blocks(), 0u) << "the cache's leases went back to the pool";
}

TEST_F(execution_cache_test, a_changed_input_reruns_what_depends_on_it_and_drops_the_old) {
  ASSERT_NO_FATAL_FAILURE(start_cached());
  ASSERT_TRUE(run(blob_prompt(1)).ok);
  auto changed = run(blob_prompt(2));
  ASSERT_TRUE(changed.ok) << changed.error->dump();
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array());
  EXPECT_FALSE(changed.nodes.at("2").cached);
  // Classic: the 1 MiB blob of the previous prompt went before this one ran.
  EXPECT_EQ(live_blocks(), 1u);
}

TEST_F(execution_cache_test, is_changed_is_part_of_the_key) {
  ASSERT_NO_FATAL_FAILURE(start_cached());
  auto checked = [](int v) {
    return json{{"1", {{"class_type", "TestChecked"}, {"inputs", {{"value", v}}}}}}.dump();
  };
  ASSERT_TRUE(run(checked(21)).ok);
  ASSERT_TRUE(run(checked(21)).ok);
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array({"1"}));
  ASSERT_TRUE(run(checked(22)).ok);
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array());
}

TEST_F(execution_cache_test, a_worker_lost_since_takes_its_entries_with_it) {
  ASSERT_NO_FATAL_FAILURE(start_cached());
  ASSERT_TRUE(run(blob_prompt(1)).ok);
  const std::string env = env_of(*host_, "TestBlob");
  const auto before = info(env);
  ASSERT_EQ(::kill(before.pid, SIGKILL), 0);
  ASSERT_TRUE(eventually(
      [&] {
        const auto* w = host_->workers().find(env);
        return w->losses > before.losses && w->state == runtime::worker_state::ready;
      },
      std::chrono::seconds(20)));
  auto after = run(blob_prompt(1));
  ASSERT_TRUE(after.ok) << after.error->dump();
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array());
  EXPECT_FALSE(after.nodes.at("1").cached);
  EXPECT_EQ(live_blocks(), 1u) << "the lost worker's entry gave its block back";
}

TEST_F(execution_cache_test, two_equal_nodes_of_one_prompt_run_once_and_leak_nothing) {
  ASSERT_NO_FATAL_FAILURE(start_cached());
  const std::string twins =
      json{{"1", {{"class_type", "TestBlob"}, {"inputs", {{"mib", 1}}}}},
           {"2", {{"class_type", "TestBlob"}, {"inputs", {{"mib", 1}}}}},
           {"3", {{"class_type", "TestBlobPeek"}, {"inputs", {{"blob", {"1", 0}}}}}},
           {"4", {{"class_type", "TestBlobPeek"}, {"inputs", {{"blob", {"2", 0}}}}}}}
          .dump();
  auto first = run(twins);
  ASSERT_TRUE(first.ok) << first.error->dump();
  std::vector<std::string> ran;
  for (const auto& e : last("executing"))
    if (e["node"].is_string()) ran.push_back(e["node"]);
  EXPECT_EQ(ran, (std::vector<std::string>{"1", "3"})) << "2 and 4 are 1 and 3 again";
  EXPECT_TRUE(first.nodes.at("2").cached);
  EXPECT_EQ(first.nodes.at("4").outputs, first.nodes.at("3").outputs);
  EXPECT_EQ(live_blocks(), 1u);
  auto again = run(twins);
  ASSERT_TRUE(again.ok) << again.error->dump();
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array({"1", "2", "3", "4"}));
  EXPECT_EQ(executor_->clear_cache(), std::optional<std::size_t>(2));
  executor_->release_outputs();
  EXPECT_EQ(live_blocks(), 0u);
}

TEST_F(execution_cache_test, without_a_policy_nothing_is_kept) {
  ASSERT_NO_FATAL_FAILURE(start());  // the executor of `run`: cache_policy::none
  ASSERT_TRUE(run(blob_prompt(1)).ok);
  ASSERT_TRUE(run(blob_prompt(1)).ok);
  EXPECT_EQ(last("execution_cached").at(0)["nodes"], json::array());
  EXPECT_EQ(last("executing").size(), 3u);
  EXPECT_EQ(executor_->cached_nodes(), 0u);
}

}  // namespace
}  // namespace orch::runtime_testing
