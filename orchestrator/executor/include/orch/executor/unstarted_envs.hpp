// unstarted_envs: what an unknown node class means when a worker is not running (docs/runtime.md,
// "Workers that cannot start"). The host learns a pack's node classes only from its worker's
// ready message, so it cannot tell whether a class it does not know belongs to a pack whose worker
// never started. The rule is the simplest honest one: when any env's worker is not ready (failed,
// or still not up when the run gave up waiting), a prompt refused with missing_node_type is a
// worker failure naming those envs and their causes (`comfy-orch run` exits 2), not a prompt
// error (exit 1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt_validation.hpp"
#include "orch/runtime/supervisor.hpp"

namespace orch::executor {

struct unstarted_env {
  std::string env;
  std::string state;  // to_string(worker_state)
  std::string error;  // the worker's last_error: the cause
};

struct unstarted_failure {
  validation_error error;  // type "worker_failed"; extra_info {missing_classes, envs}
  std::vector<unstarted_env> envs;
  std::vector<std::string> missing_classes;
};

// Empty unless `report` refused the prompt with missing_node_type and some worker is not ready.
std::optional<unstarted_failure> missing_classes_of_unstarted_envs(
    const validation_report& report, const std::vector<runtime::worker_info>& workers);

// {"error": {...}, "node_errors": {...}}: ComfyUI's /prompt answer's shape, the error being the
// worker failure and the node errors the missing classes.
nlohmann::json to_json(const unstarted_failure& failure, const validation_report& report);

}  // namespace orch::executor
