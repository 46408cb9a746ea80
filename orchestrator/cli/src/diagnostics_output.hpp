// Printing manifest diagnostics for people (one greppable line each); for tools, the CLI prints
// manifests::diagnostics_to_json.
#pragma once

#include <ostream>

#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/diagnostics_json.hpp"

namespace orch::cli {

using manifests::diagnostics_to_json;

void print_diagnostics(std::ostream& out, const manifests::diagnostics& diags);

}  // namespace orch::cli
