// worker_plugins: the host's choice of each worker's pager and allocator plugins, the protocol
// level they run at and the memory manager that follows (DESIGN.md §4.5, §4.6). This is the one
// place that decides; issue 6 replaces its rule with level matching and manager resolution.
//
// Issue 5's rule: the worker's backend's pager plugin at the highest level it speaks, and that
// backend's allocator. A backend without a pager plugin (cpu) gets none.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "orch/manifests/device_spec.hpp"

namespace orch::orchestrator {

struct worker_plugin_choice {
  std::filesystem::path pager;      // empty: none
  std::filesystem::path allocator;  // empty: none
  std::uint32_t level = 0;          // the level both run at; 0 without a pager
  std::string manager;              // "pager" or "none"
  std::string reason;               // why, one line (shown in the memory table)
};

// Looks for orch-pager-<backend>.so and orch-allocator-<backend>.so in `plugin_dirs`, in order.
worker_plugin_choice choose_worker_plugins(const manifests::device_spec& device,
                                           const std::vector<std::filesystem::path>& plugin_dirs);

}  // namespace orch::orchestrator
