#include "orch/manifests/diagnostics_json.hpp"

namespace orch::manifests {

nlohmann::json diagnostics_to_json(const diagnostics& diags) {
  auto list = nlohmann::json::array();
  for (const auto& d : diags.items()) {
    list.push_back({{"severity", to_string(d.level)},
                    {"file", d.where.file},
                    {"line", d.where.line},
                    {"column", d.where.column},
                    {"key", d.key},
                    {"message", d.message},
                    {"fix", d.fix}});
  }
  return list;
}

}  // namespace orch::manifests
