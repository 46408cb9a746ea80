// plugin_probe: the tables of the plugins in directories a pack names (its ORCH_PLUGIN_PATH),
// read in a short-lived worker process (`comfy-orch-worker --probe-plugins`) rather than in the
// host. Loading a library runs its constructors: a pack's broken or hostile build may crash or
// hang the process that loads it, and that process must not be the host. The probe's answer is
// checked like any other input from a worker (plugins::plugins_from_json).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "orch/plugins/registry.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

// Errors ("probe_failed"): the probe could not start, did not finish within `timeout` (it is
// killed), ended with a signal or a failing status, or answered something that is not a plugin
// list; each message says which, naming the directories.
result<std::vector<plugins::plugin_entry>> probe_plugins(
    const std::string& worker_executable, const std::vector<std::filesystem::path>& dirs,
    std::chrono::milliseconds timeout);

}  // namespace orch::runtime
