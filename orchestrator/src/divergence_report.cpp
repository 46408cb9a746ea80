#include "orch/orchestrator/divergence_report.hpp"

namespace orch::orchestrator {

bool debug_worker_enabled(const std::function<std::optional<std::string>(const char*)>& getenv) {
  for (const char* name : {debug_worker_variable, debug_worker_alias}) {
    const auto v = getenv(name);
    const auto flag = v ? plugins::read_flag(*v) : plugins::flag_reading::blank;
    if (flag != plugins::flag_reading::blank) return plugins::reads_as_on(flag);
  }
  return false;
}

std::vector<report_line> divergence_reporter::on_worker_ready(const worker_memory_report& report) {
  std::vector<report_line> lines;
  if (!reported_.insert(report.env).second) return lines;
  const bool diverges = report.worker.manager != host_.manager;
  const std::string routine =
      report.env + ": memory manager=" + plugins::to_string(report.worker.manager) + " (" +
      report.worker.reason + "), host=" + plugins::to_string(host_.manager) + " (" + host_.reason +
      ")";
  if (diverges && !report.acknowledged) {
    lines.push_back({report_level::warning,
                     "WARNING " + report.env +
                         ": memory manager=" + plugins::to_string(report.worker.manager) +
                         ", host=" + plugins::to_string(host_.manager) + "; worker fell back (" +
                         report.worker.reason + "). Set " + divergence_ack_variable +
                         "=1 in the pack's [env_vars] to silence."});
  } else if (debug_) {
    lines.push_back({report_level::debug, routine});
  }
  for (const auto& note : report.notes) {
    lines.push_back({report_level::note, "NOTE " + report.env + ": " + note});
  }
  return lines;
}

}  // namespace orch::orchestrator
