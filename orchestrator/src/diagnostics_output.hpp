// Printing manifest diagnostics for people (one greppable line each) and for tools (JSON).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "orch/manifests/diagnostic.hpp"

namespace orch::cli {

void print_diagnostics(std::ostream& out, const manifests::diagnostics& diags);

// [{"severity", "file", "line", "column", "key", "message", "fix"}, ...]
nlohmann::json diagnostics_to_json(const manifests::diagnostics& diags);

}  // namespace orch::cli
