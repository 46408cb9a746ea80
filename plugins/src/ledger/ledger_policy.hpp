// The ledger: ComfyUI's legacy weight manager (docs/references.md, seed "Two eras of weight
// management"). Whole models load against a byte budget, possibly
// partially (lowvram_model_memory), and are evicted whole in free_memory's order.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "../common/host_link.hpp"
#include "orch/plugin/ledger.h"

namespace orch::plugin_detail {

class ledger;

struct ledger_entry {
  ledger* owner = nullptr;
  uint64_t size = 0;
  uint64_t loaded = 0;
  uint32_t refcount = 1;
};

class ledger {
 public:
  ledger(uint64_t budget, const host_link* host) noexcept : budget_(budget), host_(host) {}
  ~ledger();

  orch_status set_budget(uint64_t bytes);
  orch_status add(uint64_t size, ledger_entry** out);
  void remove(ledger_entry* m) noexcept;
  orch_status set_refcount(ledger_entry* m, uint32_t refcount);
  orch_status load(ledger_entry* m, double model_budget, uint64_t* loaded);
  orch_status unload(ledger_entry* m, uint64_t* freed);
  orch_status info(ledger_entry* m, orch_ledger_model_info* out);
  orch_status free_memory(uint64_t bytes, uint64_t* freed);
  orch_status stats(orch_ledger_stats* out);

 private:
  uint64_t loaded_total_locked() const noexcept;
  uint64_t unload_locked(ledger_entry* m) noexcept;
  uint64_t free_locked(uint64_t bytes, const ledger_entry* keep) noexcept;

  std::mutex mutex_;
  uint64_t budget_;
  const host_link* host_;
  std::vector<ledger_entry*> models_;  // every model added
  std::vector<ledger_entry*> loaded_;  // current_loaded_models: index 0 is the latest load
  orch_ledger_stats stats_{sizeof(orch_ledger_stats), 0, 0, 0, 0, 0};
};

}  // namespace orch::plugin_detail
