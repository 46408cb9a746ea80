#include "diagnostics_output.hpp"

namespace orch::cli {

void print_diagnostics(std::ostream& out, const manifests::diagnostics& diags) {
  for (const auto& d : diags.items()) out << d.format() << '\n';
}

}  // namespace orch::cli
