// node_set: the node classes a worker serves, checked once (docs/nodes.md). They come from a
// native pack's orch_nodes_query (node_library) or, for a Python pack, from the comfy_orch
// package through orch_worker_main: the same orch_node_set either way, so both kinds of worker
// are one runtime.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"

namespace orch::worker {

// A node class as the pack declared it, with its inputs: both found in the pack's arrays by each
// element's own struct_size (nodes.h), so a pack built against longer structs reads right.
struct node_class {
  const orch_node_class* decl;
  std::vector<const orch_node_input*> inputs;  // decl->input_count of them, by slot
  nlohmann::json schema;                       // schema_json (ABI 1.1), parsed; {} when absent
  orch_node_execute_fn validate_inputs;        // ABI 1.2, or NULL
  orch_node_execute_fn is_changed;             // ABI 1.2, or NULL
};

class node_set {
 public:
  // Checks `set` as served for node ABI major ORCH_NODES_ABI_MAJOR; `origin` names where it came
  // from in errors. Errors: "abi_mismatch" (NULL, too short or another major), "invalid_pack" (a
  // class without class_type or execute, a duplicate class_type, a class or input shorter than
  // node ABI 1.0's, or a schema_json that is not a JSON object).
  static result<node_set> check(const orch_node_set* set, const std::string& origin);

  const node_class* find(const std::string& class_type) const noexcept;
  // The classes as the host's node catalogue reads them (docs/protocol.md, "ready").
  nlohmann::json describe() const;

 private:
  std::vector<node_class> classes_;
};

}  // namespace orch::worker
