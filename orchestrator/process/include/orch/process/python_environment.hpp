// python_environment: the one rule for the environment of every Python process this host starts
// (a worker, an env's pip or uv, the doctor's checks, the host stack probe), comfy-env's
// (docs/references.md, comfy-env §1.8): PYTHONPATH, PYTHONHOME, PYTHONSTARTUP and PYTHONUSERBASE
// removed and PYTHONNOUSERSITE=1, so neither the operator's shell nor a user site-packages can
// put another package ahead of the env's.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "orch/process/worker_environment.hpp"

namespace orch::process {

// The rule applied to a worker's environment.
void scrub_python_environment(environment& env);

// The rule as changes to a tool's environment (tool_command::env: a value set, nullopt removed).
void scrub_python_environment(std::map<std::string, std::optional<std::string>>& changes);

}  // namespace orch::process
