// preflight: what can be known about a deployment on this machine before anything starts
// (docs/cli.md). `validate` reports it; `run` prints it and starts nothing after an error.
//   - the plugin directories: one rule for `run`, `plugins` and `validate`; the node library
//     directories: one rule for `run` and `envs`;
//   - each [plugins] search_paths entry that is missing, not a directory, or holds no plugin;
//   - the host's device kind against the backend plugins found (what this build can open);
//   - [shm] pinned_pool_size against this machine's pinned budget (ComfyUI's formula).
// Every diagnostic points at the key's line in the deployment (deployment::positions).
#pragma once

#include <filesystem>
#include <vector>

#include "orch/ipc/pinned_budget.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/manifests/diagnostic.hpp"

namespace orch::runtime {

// The deployment's [plugins] search_paths; without them, $ORCH_PLUGIN_PATH; else the plugin
// directory installed or built with this host (install_layout.hpp; the same rule as
// `comfy-orch plugins`).
std::vector<std::filesystem::path> deployment_plugin_directories(const manifests::deployment& d);

// The deployment's [packs] library_paths; without them, the node library directory installed or
// built with this host (install_layout.hpp), where the example packs' libraries are. `run` and
// `envs` search these.
std::vector<std::filesystem::path> deployment_library_directories(const manifests::deployment& d);

// Adds the checks above to `diags`. `d.plugin_paths` must already be
// deployment_plugin_directories(d); `readings` are this machine's (ipc::probe_memory_readings).
void preflight(const manifests::deployment& d, const ipc::memory_readings& readings,
               manifests::diagnostics& diags);

}  // namespace orch::runtime
