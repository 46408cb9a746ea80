// Choosing each worker's pager and allocator plugins at the host's protocol level
// (docs/memory-semantics.md). The level is the call shape, never the version string: a version
// difference alone is a NOTE and the worker proceeds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "orch/plugins/registry.hpp"

namespace orch::runtime {

// The host's memory settings a pager can be told, and the level that can express each.
struct pager_settings {
  std::uint64_t simple_headroom = 256ull << 20;  // L3: run-time setter (aimdo default 256 MiB)
  std::uint64_t extra_headroom = 0;              // L3: per device at open (reserve_vram)
  std::uint32_t pressure_source = 0;             // L4: pressure-source selector
  bool log_callback = true;                      // L4: the host's log sink
};

struct dropped_setting {
  std::string name;   // "simple_headroom", ...
  std::string value;  // as the host has it
  unsigned needs_level = 0;
};

struct worker_plugin_choice {
  std::string backend;
  unsigned host_level = 0;
  // The pager, when one serves this backend at or below the host level. Its level is the host
  // level, or its highest level below it (`adapted`, with the settings that level drops).
  std::optional<plugins::plugin_entry> pager;
  unsigned level = 0;
  bool adapted = false;
  std::vector<dropped_setting> dropped;
  // Without a pager: the reason the worker runs the ledger ("no pager plugin for backend X").
  std::optional<std::string> ledger_reason;
  // The backend's ledger plugin when one exists, chosen or not: a worker resolves its manager
  // itself and may fall back to the ledger (docs/memory-semantics.md).
  std::optional<plugins::plugin_entry> ledger;
  // Injected on every backend, cpu included.
  std::optional<plugins::plugin_entry> allocator;
  // NOTE lines (version differences); never a reason to fall back.
  std::vector<std::string> notes;
};

// The host's own pager for its backend: the one speaking the highest level (ties: name order).
// Its max_level is the host level. nullopt when the backend has no pager plugin.
std::optional<plugins::plugin_entry> host_pager(const std::vector<plugins::plugin_entry>& found,
                                                const std::string& backend);

// For a worker on `backend`: 1. a pager whose [min_level, max_level] contains `host_level`
// (preferring the host pager's name, then the highest max_level); 2. else the highest level
// below it, through an adapter dropping what that level cannot express; 3. else the ledger.
worker_plugin_choice choose_worker_plugins(const std::vector<plugins::plugin_entry>& found,
                                           const std::string& backend, unsigned host_level,
                                           const plugins::plugin_entry* host_pager_entry,
                                           const pager_settings& settings);

// One log line per dropped setting, naming the env:
// "env sam3-nodes: pager sim-pager-l2 speaks L2, host speaks L4: dropped simple_headroom=268435456
// (needs L3)".
std::vector<std::string> dropped_setting_lines(const std::string& env,
                                               const worker_plugin_choice& choice);

}  // namespace orch::runtime
