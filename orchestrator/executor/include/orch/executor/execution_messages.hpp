// execution_messages: the fields ComfyUI's executor puts in its messages beyond the executor's
// own error record (execution.py at the commit docs/references.md names; shapes only):
// execution_error carries the failing node's inputs and the ids of the nodes that have outputs,
// execution_interrupted carries no exception fields, and every executor message carries the
// time it was sent (add_message's timestamp, in milliseconds).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace orch::executor {

std::uint64_t now_ms();

// A node's input items as ComfyUI's format_value shows them: null, numbers, booleans, strings
// and plain objects as they are; a tensor as a short description (ComfyUI's str(tensor)).
nlohmann::json current_inputs(const std::map<std::string, nlohmann::json>& lists);

// execution_error's message: the error record with timestamp, current_inputs and
// current_outputs (the ids of the nodes that have outputs) added, and exception_type a Python
// type name as ComfyUI's is: one of comfy-orch's codes (worker_died, value_error, ...) becomes
// the exception ComfyUI would have raised (RuntimeError, ValueError, torch.OutOfMemoryError)
// and stays in orch_error_type.
nlohmann::json error_message(nlohmann::json error, const nlohmann::json& inputs,
                             const nlohmann::json& outputs);

// execution_interrupted's message: prompt_id, node_id, node_type, executed and timestamp.
nlohmann::json interrupted_message(const nlohmann::json& error);

}  // namespace orch::executor
