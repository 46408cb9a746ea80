// deployment_plan: `comfy-orch plan` (docs/cli.md, "plan"): what `serve` or `run` would decide
// for a deployment, without starting a worker. The host's device, manager and level; for each
// env, the library or interpreter, the device, the memory manager and why, the plugins at the
// host's level with the settings the adapter drops, and the divergences to expect from it, or
// why the env runs no worker. Only the host's device is opened (its runtime version is what
// [memory.runtime_floor] is checked against); no pool, control segment or share of the
// machine's budget is taken, so a plan runs beside a live serve.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "orch/runtime/host_startup.hpp"
#include "orch/support/result.hpp"

namespace orch::cli {

// Errors: open_host_device's, and "memory_unreadable".
result<nlohmann::json> plan_deployment(const runtime::prepared_deployment& prepared,
                                       const std::string& worker_executable, bool python_workers);

std::string format_plan(const nlohmann::json& plan);

}  // namespace orch::cli
