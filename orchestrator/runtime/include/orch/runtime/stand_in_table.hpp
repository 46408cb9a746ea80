// The host's ledger of evictable models: its own, and one stand-in per model that lives in a
// worker (docs/memory-semantics.md; docs/references.md, comfy-env §3.7). Eviction follows
// ComfyUI's free_memory (docs/references.md, ComfyUI §1.3) over both, so a worker's model is
// evictable even when every host model is dynamic: the stand-in reports itself non-dynamic on
// purpose (seed, "the ground has shifted").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace orch::runtime {

struct model_entry {
  std::string id;              // unique: "<env>/<model>" for stand-ins, anything for host models
  std::string env;             // the worker's env; empty for the host's own models
  std::uint64_t size = 0;      // model_memory()
  std::uint64_t resident = 0;  // model_loaded_memory(): for a stand-in, the last receipt's figure
  std::uint32_t refcount = 1;
  bool dynamic = false;  // a host model under the pager; stand-ins are never dynamic
  std::uint64_t receipt_seq = 0;
  // What the loader node whose call created it was asked to load, as a fleet's gateway names a
  // prompt's models ("checkpoints/sd15.safetensors", orch/fleet/prompt_needs.hpp); empty when
  // the node named no model file (a pack's own loader) or the model is the host's.
  std::vector<std::string> asked;

  bool is_stand_in() const { return !env.empty(); }
  std::uint64_t offloaded() const { return size > resident ? size - resident : 0; }
};

// One model unloaded (or partly unloaded) by free_memory.
struct eviction_step {
  std::string id;
  std::string env;
  std::uint64_t asked = 0;  // memory_to_free passed to it
  std::uint64_t freed = 0;  // what it actually freed (a stand-in: the worker's receipt)
};

class stand_in_table {
 public:
  // Asks a model to free `bytes` (ComfyUI's model_unload(memory_to_free)); returns the bytes
  // actually freed, measured (for a stand-in: the receipt's figure, read on the device).
  using evictor = std::function<std::uint64_t(const model_entry&, std::uint64_t bytes)>;
  // The device's free memory now (get_free_memory).
  using free_reader = std::function<std::uint64_t()>;

  // A new load goes in at index 0 (most recently used first). Replaces an entry with that id.
  void load(model_entry entry);
  void remove(const std::string& id);
  // Every stand-in of an env (its worker died or was replaced).
  std::size_t remove_env(const std::string& env);
  // A receipt from a worker: resident bytes as of `seq`. Older sequence numbers are stale and
  // ignored (returns false), so a late receipt cannot resurrect freed bytes.
  bool apply_receipt(const std::string& id, std::uint64_t resident, std::uint64_t seq);
  // Records what the loader of model `id` was asked to load; false when there is no such model.
  bool set_asked(const std::string& id, std::vector<std::string> asked);

  // ComfyUI's candidate order: ascending (-offloaded, refcount, size, index).
  std::vector<const model_entry*> eviction_order() const;

  // ComfyUI's free_memory(memory_required, device, for_dynamic): walks the candidates in order;
  // each is asked for memory_required - free(); with for_dynamic a dynamic model is skipped and
  // its resident bytes are taken off memory_required (it pages on demand). Resident figures are
  // updated from what each eviction actually freed.
  std::vector<eviction_step> free_memory(std::uint64_t memory_required, bool for_dynamic,
                                         const free_reader& free_now, const evictor& evict);

  const std::vector<model_entry>& entries() const { return entries_; }
  const model_entry* find(const std::string& id) const;

 private:
  std::vector<model_entry> entries_;  // index 0: most recently loaded
};

}  // namespace orch::runtime
