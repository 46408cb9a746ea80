// Divergence report (docs/memory-semantics.md): what the memory table and the log say about each
// worker's memory manager and settings against the host's, decided once per env when it is ready.
#include "orch/runtime/divergence_report.hpp"

#include <spdlog/spdlog.h>

#include "orch/runtime/supervisor.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {

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

// The supervisor's part: reads the ready worker's plugin report and published settings hash.
void supervisor::report_divergence(worker& w) {
  using nlohmann::json;
  const json& p = w.info.plugins;
  w.info.manager = text_field(p, "manager");
  w.info.manager_reason = printable(text_field(p, "reason"));  // a pack's text, for the table
  const auto manager =
      w.info.manager == "pager" ? plugins::memory_manager::pager : plugins::memory_manager::ledger;
  const unsigned level = manager == plugins::memory_manager::pager ? w.spec.plugins.level : 0;
  const std::uint64_t expected = plugins::applied_settings_hash(w.spec.memory, manager, level);
  // The worker published its snapshot before it sent ready.
  const auto stats = memory_.control().block(w.info.slot).read();
  const std::uint64_t published = stats ? stats->settings_hash : 0;
  w.info.settings_match = published == expected;
  if (!w.info.settings_match) {
    spdlog::warn(
        "worker {}: applied memory settings hash {:016x}, the host expects {:016x}: "
        "the worker runs other settings than the host sent (a stale build?)",
        w.spec.env, published, expected);
  }
  // ORCH_DIVERGENCE_ACK in the pack's [env_vars] (which win, as in the worker's environment) or
  // the operator's shell: intended divergence, when it reads as set.
  std::optional<std::string> ack;
  if (auto it = options_.operator_env.find(divergence_ack_variable);
      it != options_.operator_env.end()) {
    ack = it->second;
  }
  for (const auto& [name, value] : w.spec.env_vars) {
    if (name == divergence_ack_variable) ack = value;
  }
  const bool acknowledged = ack && plugins::reads_as_on(plugins::read_flag(*ack));
  w.info.divergence_acknowledged = acknowledged;
  worker_memory_report report{
      w.spec.env, {manager, w.info.manager_reason}, w.spec.plugins.notes, acknowledged};
  for (const auto& line : divergence_.on_worker_ready(report)) {
    if (line.level == report_level::warning) {
      spdlog::warn("{}", line.text);
    } else {
      spdlog::info("{}", line.text);
    }
  }
}

}  // namespace orch::runtime
