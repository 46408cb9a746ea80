// Prompt validation with ComfyUI's error types and response shape (execution.py
// validate_prompt; docs/references.md, ComfyUI §1.10), done before any node runs.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/runtime/node_catalogue.hpp"

namespace orch::executor {

struct validation_error {
  std::string type;     // missing_node_type, required_input_missing, bad_linked_input, ...
  std::string message;  // ComfyUI's wording
  std::string details;
  nlohmann::json extra_info = nlohmann::json::object();
};

struct node_error {
  std::string class_type;
  std::vector<validation_error> errors;
  std::vector<std::string> dependent_outputs;
};

struct validation_report {
  std::optional<validation_error> error;          // empty when the prompt may run
  std::vector<std::string> outputs;               // output node ids that validated
  std::map<std::string, node_error> node_errors;  // by node id
  // Every class the prompt names that no pack provides (missing_node_type reports the first
  // node only, as ComfyUI; the others are in its extra_info.orch_missing_nodes).
  std::set<std::string> missing_classes;

  bool ok() const { return !error.has_value(); }
  // {"error": {...} | null, "node_errors": {id: {...}}}, as ComfyUI's /prompt answers.
  nlohmann::json to_json() const;
};

// Runs the VALIDATE_INPUTS of node `id`'s class where the class lives (executor::
// worker_validation): `literals` are the literal inputs it is sent ({name: value}),
// `input_types` the types the node's linked inputs receive. Returns the node's error when it
// refused them (custom_validation_failed) or could not run (exception_during_validation);
// nullopt accepts them.
using custom_validation = std::function<std::optional<validation_error>(
    const prompt& p, const std::string& id, const runtime::node_class& cls,
    const nlohmann::json& literals, const nlohmann::json& input_types)>;

// Validates every output node's dependency closure. A node without a class_type, or whose class
// no pack provides, refuses the prompt first, as ComfyUI: missing_node_type for the first such
// node in document order, with empty node_errors (every such node in orch_missing_nodes). A class with VALIDATE_INPUTS is checked by
// `custom` once its own inputs are, and then the checks its method replaces are skipped
// (input_validation); without `custom` every check of the host stands.
validation_report validate_prompt(const prompt& p, const runtime::node_catalogue& catalogue,
                                  const custom_validation& custom = {});

// ComfyUI's log lines for each output a prompt that may run goes without (validate_prompt's
// "Failed to validate prompt for output 9:", "* Class 4:", "  - message: details", "Output will
// be ignored"); empty when every output validated. The text is the prompt's: print it escaped.
std::vector<std::string> ignored_outputs_log(const validation_report& report);

// The dependency closure of `outputs` in an order where every node follows its inputs; ties are
// broken by node id so a run is reproducible. Requires a validated (acyclic) prompt; a cycle
// cannot make it loop. Validation and ordering walk the graph on explicit stacks: a chain of
// 100,000 nodes validates, and a cycle of as many is reported as dependency_cycle.
std::vector<std::string> execution_order(const prompt& p, const std::vector<std::string>& outputs);

// The report of a prompt that could not be read or parsed (parse_prompt's error): ComfyUI's
// invalid_prompt in the same {error, node_errors} shape as every other refusal, with no node
// errors, as ComfyUI answers a node without class_type.
validation_report invalid_prompt_report(const error& e);

}  // namespace orch::executor
