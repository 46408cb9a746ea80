// host_facts: what the gateway knows of a host and of a prompt for placement (placement.hpp's
// host_view and prompt_needs), read from what `comfy-orch serve` answers today: a host's node
// classes are its /object_info's keys, its free device memory /system_stats' devices[0].vram_free,
// its fingerprint "" (every host matches the fleet's "") and no models resident; a prompt needs
// its nodes' class_type set and no models. This is the one place that reads them: when serve
// reports GET /orch/fleet/host and the fleet library parses it (host_report.hpp,
// prompt_needs_of), these two functions are what is replaced.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "orch/fleet/placement.hpp"

namespace orch::gateway {

// Fills `view`'s node classes from an /object_info answer and its free device bytes from a
// /system_stats answer (either may be null: that part is left as it was).
void read_host_facts(fleet::host_view& view, const nlohmann::json& object_info,
                     const nlohmann::json& system_stats);

// The prompt's node classes (each node's class_type); models: none yet.
fleet::prompt_needs needs_of_prompt(const std::string& prompt_id, const nlohmann::json& prompt);

}  // namespace orch::gateway
