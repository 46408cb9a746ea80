#include "diagnostics_output.hpp"

namespace orch::cli {

void print_diagnostics(std::ostream& out, const manifests::diagnostics& diags) {
  for (const auto& d : diags.items()) out << d.format() << '\n';
}

nlohmann::json diagnostics_to_json(const manifests::diagnostics& diags) {
  auto list = nlohmann::json::array();
  for (const auto& d : diags.items()) {
    list.push_back({{"severity", manifests::to_string(d.level)},
                    {"file", d.where.file},
                    {"line", d.where.line},
                    {"column", d.where.column},
                    {"key", d.key},
                    {"message", d.message},
                    {"fix", d.fix}});
  }
  return list;
}

}  // namespace orch::cli
