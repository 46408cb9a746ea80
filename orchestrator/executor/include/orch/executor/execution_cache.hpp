// execution_cache: ComfyUI's output cache across prompts (docs/serve.md, "Cache";
// comfy_execution/caching.py's CacheKeySetInputSignature with the classic and LRU policies).
//
// A node's key is its input signature: its class, its IS_CHANGED value, its node id when the
// class is NOT_IDEMPOTENT or asks for UNIQUE_ID, and its inputs by name, a literal by value and a
// link by the producer's serial and slot. Every key gets a serial, which a hit keeps and a miss
// takes fresh, so two keys are equal exactly when the nodes' whole ancestries are: no graph walk
// and no hash that could collide. A node with no key (IS_CHANGED failed or gave NaN, ComfyUI's
// "always changed") and every node below it is neither served nor kept.
//
// An entry holds the host leases of the blocks its node returned, charged to the one pinned
// budget; an object output stays a handle in its worker. Every entry a kept entry's outputs can
// name is kept with it: a hit's ancestors were hits in the same prompt, so the classic policy
// (what the last prompt used) and the LRU one (what one of the last N prompts used) never drop an
// ancestor before its descendants, and drop() takes descendants with the entries it drops.
// The cache does no I/O: what it drops comes back as leases for the caller to release.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/executor/node_outcome.hpp"
#include "orch/ipc/descriptor.hpp"
#include "orch/manifests/deployment.hpp"

namespace orch::executor {

// One node of a prompt as the cache sees it.
struct cache_key {
  std::string text;          // empty: the node cannot be cached
  std::uint64_t serial = 0;  // what the keys of the nodes it feeds name it by
  bool hit = false;  // kept by an earlier prompt (execution_cached lists it)
  std::vector<std::uint64_t> inputs;  // the serials of its producers
};

struct cache_entry {
  std::uint64_t serial = 0;
  std::string env;
  int worker_losses = 0;  // the env's worker losses when it was kept: a later loss drops it
  node_outcome outcome;
  std::vector<ipc::buffer_descriptor> leases;
  std::vector<std::uint64_t> inputs;  // the serials of the entries its key names (its producers)
  std::uint64_t used = 0;             // the last prompt that used it
};

class execution_cache {
 public:
  execution_cache(manifests::cache_policy policy, unsigned lru_prompts)
      : policy_(policy), lru_prompts_(lru_prompts) {}

  manifests::cache_policy policy() const noexcept { return policy_; }

  // A new prompt: key its nodes (in an order where producers come first), then end_keys().
  void begin_prompt() {
    ++prompt_;
    keyed_.clear();
  }
  // The key of a node: `change` is its IS_CHANGED value (nullopt: always changed), `node_id` is
  // non-empty when the id belongs in the key, `literals` its literal inputs by name, `links` its
  // linked inputs by name with the producer's key and slot. A hit is marked used by this prompt.
  // A node whose key an earlier node of the same prompt has gets that node's serial: the first
  // runs and is kept, and find() then serves the second from it, as ComfyUI does.
  cache_key key(const std::string& class_type, const std::optional<nlohmann::json>& change,
                const std::string& node_id, const nlohmann::json& literals,
                const std::map<std::string, std::pair<const cache_key*, std::int64_t>>& links);
  // The entry for `key` now: one an earlier prompt kept, or an earlier node of this one.
  const cache_entry* find(const cache_key& key) const;
  // Every key of the prompt is known, so its hits are marked: drops what the policy no longer
  // keeps, before the prompt runs (as ComfyUI cleans, so the memory is free for this prompt):
  // classic, what this prompt does not use; LRU, what none of the last N prompts used.
  std::vector<ipc::buffer_descriptor> end_keys();
  // Keeps a node's outputs (`entry`'s env, worker losses, outcome and leases). Returns false (and keeps nothing) for a key that cannot be cached
  // or a policy that keeps nothing: the leases stay the caller's.
  bool store(const cache_key& key, cache_entry entry);
  // Drops the entries `doomed` selects and every entry whose key names a dropped one.
  std::vector<ipc::buffer_descriptor> drop(const std::function<bool(const cache_entry&)>& doomed);
  std::vector<ipc::buffer_descriptor> clear() {
    return drop([](const cache_entry&) { return true; });
  }

  std::size_t size() const noexcept { return entries_.size(); }
  // Every lease the cache holds (tensor inputs a node of a later prompt may be given).
  std::vector<ipc::buffer_descriptor> leases() const;

 private:
  manifests::cache_policy policy_;
  unsigned lru_prompts_;
  std::uint64_t prompt_ = 0;
  std::uint64_t next_serial_ = 0;
  std::map<std::string, cache_entry> entries_;  // by key text
  std::map<std::uint64_t, std::string> by_serial_;
  std::map<std::string, std::uint64_t> keyed_;  // this prompt's keys so far, with their serials
};

}  // namespace orch::executor
