// execution_cache: ComfyUI's input signatures (a changed literal misses and so does everything
// below it, an unchanged branch hits), IS_CHANGED and NOT_IDEMPOTENT, the classic and LRU
// policies, and drop() taking the entries below a dropped one with it.
#include <gtest/gtest.h>

#include "orch/executor/execution_cache.hpp"

namespace orch::executor {
namespace {

using manifests::cache_policy;
using nlohmann::json;
using links = std::map<std::string, std::pair<const cache_key*, std::int64_t>>;

ipc::buffer_descriptor block(std::uint64_t offset) { return {0, 1, offset, 64}; }

// A prompt of three nodes: load(seed-free) -> sample(seed) -> save.
struct chain_keys {
  cache_key load, sample, save;
};

chain_keys key_chain(execution_cache& c, std::int64_t seed,
                     const std::optional<json>& change = json()) {
  chain_keys k;
  c.begin_prompt();
  k.load = c.key("Load", json(), "", {{"name", "model.bin"}}, {});
  k.sample = c.key("Sample", change, "", {{"seed", seed}}, links{{"model", {&k.load, 0}}});
  k.save = c.key("Save", json(), "", json::object(), links{{"latent", {&k.sample, 0}}});
  return k;
}

void store_chain(execution_cache& c, const chain_keys& k) {
  std::uint64_t offset = 0;
  for (const cache_key* key : {&k.load, &k.sample, &k.save}) {
    if (key->hit) continue;
    cache_entry e;
    e.env = "pack";
    e.leases = {block(offset += 64)};
    c.store(*key, std::move(e));
  }
}

TEST(execution_cache, a_changed_seed_reruns_only_what_depends_on_it) {
  execution_cache c(cache_policy::classic, 1);
  auto first = key_chain(c, 1);
  EXPECT_TRUE(c.end_keys().empty());
  EXPECT_FALSE(first.load.hit || first.sample.hit || first.save.hit);
  store_chain(c, first);
  EXPECT_EQ(c.size(), 3u);

  auto same = key_chain(c, 1);
  EXPECT_TRUE(same.load.hit && same.sample.hit && same.save.hit);
  EXPECT_TRUE(c.end_keys().empty());
  ASSERT_NE(c.find(same.sample), nullptr);

  auto reseeded = key_chain(c, 2);
  EXPECT_TRUE(reseeded.load.hit);
  EXPECT_FALSE(reseeded.sample.hit);
  EXPECT_FALSE(reseeded.save.hit) << "below a miss everything misses";
  // Classic: what this prompt does not use goes before it runs (sample and save of seed 1).
  EXPECT_EQ(c.end_keys().size(), 2u);
  EXPECT_EQ(c.size(), 1u);
}

TEST(execution_cache, keys_do_not_depend_on_the_node_ids_but_on_the_ancestry) {
  execution_cache c(cache_policy::classic, 1);
  c.begin_prompt();
  auto a = c.key("Load", json(), "", {{"name", "x"}}, {});
  cache_entry e;
  c.store(a, std::move(e));
  c.begin_prompt();
  auto b = c.key("Load", json(), "", {{"name", "x"}}, {});  // another node id, same signature
  EXPECT_TRUE(b.hit);
  auto other_class = c.key("Load2", json(), "", {{"name", "x"}}, {});
  EXPECT_FALSE(other_class.hit);
  auto link_slot = c.key("Use", json(), "", json::object(), links{{"in", {&b, 1}}});
  auto link_slot0 = c.key("Use", json(), "", json::object(), links{{"in", {&b, 0}}});
  EXPECT_NE(link_slot.text, link_slot0.text) << "the slot is part of the key";
}

TEST(execution_cache, is_changed_values_and_their_failure) {
  execution_cache c(cache_policy::classic, 1);
  store_chain(c, key_chain(c, 1, json("v1")));
  EXPECT_TRUE(key_chain(c, 1, json("v1")).sample.hit);
  EXPECT_FALSE(key_chain(c, 1, json("v2")).sample.hit) << "another IS_CHANGED value misses";
  // A failed IS_CHANGED (or NaN) is "always changed": no key, and nothing below it is kept.
  auto failed = key_chain(c, 1, std::nullopt);
  EXPECT_TRUE(failed.sample.text.empty());
  EXPECT_TRUE(failed.save.text.empty());
  cache_entry e;
  EXPECT_FALSE(c.store(failed.sample, std::move(e)));
  auto nan = key_chain(c, 1, json(std::nan("")));
  EXPECT_TRUE(nan.sample.text.empty());
  auto nested_nan = key_chain(c, 1, json::array({1, std::nan("")}));
  EXPECT_TRUE(nested_nan.sample.text.empty());
}

TEST(execution_cache, the_same_node_twice_in_one_prompt_runs_once_and_is_kept_once) {
  // Two equal EmptyLatentImage nodes feeding two samplers: one key, one serial, one entry.
  execution_cache c(cache_policy::classic, 1);
  c.begin_prompt();
  auto a = c.key("Empty", json(), "", {{"w", 512}}, {});
  auto b = c.key("Empty", json(), "", {{"w", 512}}, {});
  EXPECT_EQ(a.serial, b.serial);
  EXPECT_FALSE(a.hit || b.hit) << "neither was kept before this prompt";
  EXPECT_EQ(c.find(b), nullptr);
  cache_entry first;
  first.leases = {block(64)};
  ASSERT_TRUE(c.store(a, std::move(first)));
  ASSERT_NE(c.find(b), nullptr) << "the second is served from the first";
  cache_entry again;
  again.leases = {block(128)};
  EXPECT_FALSE(c.store(b, std::move(again))) << "an overwrite would lose the first's leases";
  // Their consumers' keys name the one serial, so the next prompt hits both.
  auto use_a = c.key("Sample", json(), "", json::object(), links{{"in", {&a, 0}}});
  auto use_b = c.key("Sample", json(), "", json::object(), links{{"in", {&b, 0}}});
  EXPECT_EQ(use_a.text, use_b.text);
  EXPECT_EQ(c.clear().size(), 1u) << "one entry, one lease, no crash";
}

TEST(execution_cache, a_not_idempotent_node_is_keyed_by_its_id) {
  execution_cache c(cache_policy::classic, 1);
  c.begin_prompt();
  auto a = c.key("Noise", json(), "5", json::object(), {});
  auto b = c.key("Noise", json(), "6", json::object(), {});
  EXPECT_NE(a.text, b.text);
}

TEST(execution_cache, lru_keeps_the_last_n_prompts) {
  execution_cache c(cache_policy::lru, 2);
  store_chain(c, key_chain(c, 1));
  c.end_keys();
  store_chain(c, key_chain(c, 2));
  EXPECT_TRUE(c.end_keys().empty());
  EXPECT_EQ(c.size(), 5u);  // load shared, sample and save twice
  auto third = key_chain(c, 3);
  // Prompt 1's sample and save were last used two prompts before this one.
  EXPECT_EQ(c.end_keys().size(), 2u);
  store_chain(c, third);
  EXPECT_TRUE(key_chain(c, 2).sample.hit);
  c.end_keys();
  EXPECT_FALSE(key_chain(c, 1).sample.hit);
}

TEST(execution_cache, none_keeps_nothing) {
  execution_cache c(cache_policy::none, 1);
  auto k = key_chain(c, 1);
  EXPECT_TRUE(k.load.text.empty());
  cache_entry e;
  EXPECT_FALSE(c.store(k.load, std::move(e)));
  EXPECT_EQ(c.size(), 0u);
}

TEST(execution_cache, dropping_an_entry_drops_what_its_outputs_fed) {
  execution_cache c(cache_policy::lru, 10);
  auto k = key_chain(c, 1);
  store_chain(c, k);
  cache_entry other;
  other.env = "other";
  c.begin_prompt();
  auto unrelated = c.key("Other", json(), "", {{"x", 1}}, {});
  other.leases = {block(4096)};
  c.store(unrelated, std::move(other));
  // The load's worker was replaced: its entry and the two below it go, the other env stays.
  auto released = c.drop([&](const cache_entry& e) { return e.serial == k.load.serial; });
  EXPECT_EQ(released.size(), 3u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.leases().size(), 1u);
  EXPECT_EQ(c.clear().size(), 1u);
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace orch::executor
