// node_values: how node inputs and outputs travel in a call (docs/protocol.md, "call"): literals
// as themselves, a tensor as {"tensor": {dtype, shape, descriptor}} naming a pool block, never
// its bytes. Inputs are checked on the way in (a tensor's extent against its block).
#pragma once

#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "node_set.hpp"
#include "orch/ipc/segment_table.hpp"
#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"

namespace orch::worker {

// What the decoded input values of one call point into: their strings and container items.
struct value_storage {
  std::deque<std::string> strings;
  std::deque<std::vector<orch_value_item>> items;
};

// One output value as the call's response carries it: a LIST as an array, a DICT as
// {"dict": {...}}, each item in turn.
nlohmann::json value_to_json(const orch_value& v);
// Decodes one input value for declared type `type` ("*": by the JSON's own kind, as items of a
// LIST or DICT are). Strings and items stay owned by `storage`; a tensor is mapped through
// `segments`. Errors: "bad_value", tensor_view's errors.
result<orch_value> value_from_json(const nlohmann::json& j, const std::string& type,
                                   ipc::segment_table& segments, value_storage& storage);

// A call's inputs for `cls`, by slot: `given` (the body's {name: value}) decoded, the class's
// default where an input is absent and `defaults` is set (a node call; a class method's absent
// inputs are linked ones, which ComfyUI passes as None), ORCH_VALUE_NONE elsewhere. `seen` gets
// each tensor input as the worker mapped it. An error names the input.
struct decoded_inputs {
  std::vector<orch_value> values;
  nlohmann::json seen = nlohmann::json::object();
};
result<decoded_inputs> decode_inputs(const node_class& cls, const nlohmann::json& given,
                                     ipc::segment_table& segments, value_storage& storage,
                                     bool defaults);

}  // namespace orch::worker
