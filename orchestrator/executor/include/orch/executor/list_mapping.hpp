// ComfyUI's list mapping (execution.py _map_node_over_list and merge_result_data; docs/runtime.md,
// "Lists"): every value between nodes is a list of items. A literal input is a list of one item;
// an output slot a class declares OUTPUT_IS_LIST gives the items its node returned as a list.
//   - A class with INPUT_IS_LIST is called once, with every input as the whole list.
//   - Any other class is called once per item of its longest input list; a shorter list repeats
//     its last item. With no inputs it is called once.
//   - The calls' outputs are merged per slot: an OUTPUT_IS_LIST slot concatenates the lists each
//     call returned; any other slot collects one item per call.
// A worker is not trusted to return a list where its class declared one: that is a typed error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/runtime/node_catalogue.hpp"
#include "orch/support/result.hpp"

namespace orch::executor {

// The inputs of each call, from one list per input name: a {name: list} object per call for a
// class with INPUT_IS_LIST (one call, empty lists included), else {name: item}. An empty input
// list leaves a node without INPUT_IS_LIST nothing to be called with: an invalid_input error
// naming the input.
result<std::vector<nlohmann::json>> call_inputs(const runtime::node_class& cls,
                                                const std::map<std::string, nlohmann::json>& lists);

// The node's output lists, one JSON array per slot, from the `outputs` array of each call, in
// call order. An OUTPUT_IS_LIST slot that is not an array is an invalid_output error.
result<nlohmann::json> merge_call_outputs(const runtime::node_class& cls,
                                          const std::vector<nlohmann::json>& call_outputs);

}  // namespace orch::executor
