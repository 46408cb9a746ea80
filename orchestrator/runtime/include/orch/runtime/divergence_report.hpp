// Divergence reports (docs/memory-semantics.md): once per env, and again after that env's worker
// is replaced, a WARNING when the worker's memory manager differs from the host's; a NOTE for
// plugin version differences; the routine line only under ORCH_DEBUG_WORKER (alias
// COMFY_ENV_DEBUG_WORKER). The reporter only decides what to say; the caller logs it.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "orch/plugins/memory_manager.hpp"

namespace orch::runtime {

enum class report_level { debug, note, warning };

struct report_line {
  report_level level = report_level::debug;
  std::string text;
};

struct worker_memory_report {
  std::string env;
  plugins::manager_choice worker;  // the worker's manager and its own reason
  std::vector<std::string> notes;  // plugin version differences (plugin_selection)
  bool acknowledged = false;       // ORCH_DIVERGENCE_ACK set for this worker
};

// Variables: ORCH_DEBUG_WORKER / COMFY_ENV_DEBUG_WORKER turn the routine line on;
// ORCH_DIVERGENCE_ACK in a pack's [env_vars] (or the operator's shell) says the divergence is
// intended and turns that env's WARNING into the routine line.
inline constexpr const char* debug_worker_variable = "ORCH_DEBUG_WORKER";
inline constexpr const char* debug_worker_alias = "COMFY_ENV_DEBUG_WORKER";
inline constexpr const char* divergence_ack_variable = "ORCH_DIVERGENCE_ACK";

// True for a set, non-falsy value of ORCH_DEBUG_WORKER or its alias.
bool debug_worker_enabled(const std::function<std::optional<std::string>(const char*)>& getenv);

class divergence_reporter {
 public:
  divergence_reporter(plugins::manager_choice host, bool debug_worker)
      : host_(std::move(host)), debug_(debug_worker) {}

  // A worker of `report.env` finished its handshake. Returns what to log now: nothing when this
  // env was already reported since its last replacement.
  std::vector<report_line> on_worker_ready(const worker_memory_report& report);

  // The env's worker died or was replaced: its next report is said again.
  void on_worker_replaced(const std::string& env) { reported_.erase(env); }

 private:
  plugins::manager_choice host_;
  bool debug_;
  std::set<std::string> reported_;
};

}  // namespace orch::runtime
