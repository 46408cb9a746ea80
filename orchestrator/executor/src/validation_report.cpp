// A validation report as it is shown: ComfyUI's /prompt answer (to_json) and the log lines of the
// outputs a prompt runs without (ignored_outputs_log). prompt_validation.hpp.
#include <algorithm>
#include <set>

#include "orch/executor/prompt_validation.hpp"

namespace orch::executor {
namespace {

nlohmann::json error_to_json(const validation_error& e) {
  return {{"type", e.type},
          {"message", e.message},
          {"details", e.details},
          {"extra_info", e.extra_info}};
}

}  // namespace

nlohmann::json validation_report::to_json() const {
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [id, ne] : node_errors) {
    auto errors = nlohmann::json::array();
    for (const auto& e : ne.errors) errors.push_back(error_to_json(e));
    nodes[id] = {{"errors", errors},
                 {"dependent_outputs", ne.dependent_outputs},
                 {"class_type", ne.class_type}};
  }
  return {{"error", error ? error_to_json(*error) : nlohmann::json(nullptr)},
          {"node_errors", nodes}};
}

std::vector<std::string> ignored_outputs_log(const validation_report& report) {
  std::vector<std::string> lines;
  if (!report.ok()) return lines;  // a refusal is reported as one
  std::set<std::string> ignored;
  for (const auto& [id, ne] : report.node_errors)
    ignored.insert(ne.dependent_outputs.begin(), ne.dependent_outputs.end());
  for (const auto& out : ignored) {
    lines.push_back("Failed to validate prompt for output " + out + ":");
    for (const auto& [id, ne] : report.node_errors) {
      const auto& deps = ne.dependent_outputs;
      if (std::find(deps.begin(), deps.end(), out) == deps.end()) continue;
      lines.push_back("* " + ne.class_type + " " + id + ":");
      for (const auto& e : ne.errors) lines.push_back("  - " + e.message + ": " + e.details);
    }
    lines.push_back("Output will be ignored");
  }
  return lines;
}

}  // namespace orch::executor
