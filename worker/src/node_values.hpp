// node_values: how node inputs and outputs travel in a call (docs/protocol.md, "call"): literals
// as themselves, a tensor as {"tensor": {dtype, shape, descriptor}} naming a pool block, never
// its bytes. Inputs are checked on the way in (a tensor's extent against its block).
#pragma once

#include <deque>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/segment_table.hpp"
#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"

namespace orch::worker {

// One output value as the call's response carries it.
nlohmann::json value_to_json(const orch_value& v);
// Decodes one input value for declared type `type`. Strings stay owned by `storage`; a tensor
// is mapped through `segments`. Errors: "bad_value", tensor_view's errors.
result<orch_value> value_from_json(const nlohmann::json& j, const std::string& type,
                                   ipc::segment_table& segments, std::deque<std::string>& storage);

}  // namespace orch::worker
