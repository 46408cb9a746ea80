// Manifest diagnostics as JSON, for tools (`--json` of the CLI) and for the host C API's errors
// alike: [{"severity", "file", "line", "column", "key", "message", "fix"}, ...].
#pragma once

#include <nlohmann/json.hpp>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests {

nlohmann::json diagnostics_to_json(const diagnostics& diags);

}  // namespace orch::manifests
