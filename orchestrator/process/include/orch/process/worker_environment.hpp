// worker_environment: the environment a worker process starts with (docs/runtime.md, "The worker's
// environment"; docs/references.md, comfy-env §1.8 on how comfy-env builds it). Layers, in order:
//   1. the operator's environment (the host's own, as it was started);
//   2. the pack's [env_vars], which override it (the pack author knows what its nodes need);
//   3. host-derived values, written only where the name is still absent, so an operator or pack
//      can always pin one. ORCH_WORKER_PAGER is added after these layers by the supervisor, also
//      only where absent (and where comfy-env's alias is absent too).
// A pure function over its inputs, so the order is tested without spawning anything.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace orch::process {

using environment = std::map<std::string, std::string>;

environment build_worker_environment(
    const environment& operator_env,
    const std::vector<std::pair<std::string, std::string>>& pack_env_vars,
    const environment& host_derived);

// The calling process's environment (environ), as layer 1.
environment current_environment();

// "NAME=value" strings for execve.
std::vector<std::string> to_envp(const environment& env);

}  // namespace orch::process
