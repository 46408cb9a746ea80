#include "orch/executor/unstarted_envs.hpp"

#include <set>

namespace orch::executor {

std::optional<unstarted_failure> missing_classes_of_unstarted_envs(
    const validation_report& report, const std::vector<runtime::worker_info>& workers) {
  if (report.ok()) return std::nullopt;
  const std::set<std::string>& missing = report.missing_classes;
  if (missing.empty()) return std::nullopt;
  unstarted_failure f;
  for (const auto& w : workers) {
    if (w.state == runtime::worker_state::ready) continue;
    f.envs.push_back({w.env, runtime::to_string(w.state), w.last_error});
  }
  if (f.envs.empty()) return std::nullopt;
  f.missing_classes.assign(missing.begin(), missing.end());

  std::string classes, envs;
  for (const auto& c : f.missing_classes) classes += (classes.empty() ? "'" : ", '") + c + "'";
  nlohmann::json env_list = nlohmann::json::array();
  for (const auto& e : f.envs) {
    envs += (envs.empty() ? "" : "; ") + e.env + " (" + e.state + ": " + e.error + ")";
    env_list.push_back({{"env", e.env}, {"state", e.state}, {"error", e.error}});
  }
  f.error.type = "worker_failed";
  f.error.message = "Node " + classes + " not found, and " + std::to_string(f.envs.size()) +
                    " env(s) whose node classes are unknown did not start: " + envs;
  f.error.details = "a pack whose worker is not running may provide it; fix the cause above, "
                    "then run again";
  f.error.extra_info = {{"missing_classes", f.missing_classes}, {"envs", std::move(env_list)}};
  return f;
}

nlohmann::json to_json(const unstarted_failure& failure, const validation_report& report) {
  nlohmann::json j = report.to_json();
  j["error"] = {{"type", failure.error.type},
                {"message", failure.error.message},
                {"details", failure.error.details},
                {"extra_info", failure.error.extra_info}};
  return j;
}

}  // namespace orch::executor
