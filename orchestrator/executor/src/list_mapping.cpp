#include "orch/executor/list_mapping.hpp"

#include <algorithm>

#include "orch/executor/errc.hpp"

namespace orch::executor {

using nlohmann::json;

result<std::vector<json>> call_inputs(const runtime::node_class& cls,
                                      const std::map<std::string, json>& lists) {
  // ComfyUI calls an INPUT_IS_LIST node with an empty list as it is; only a node mapped over
  // the items has nothing to call with.
  std::size_t calls = 1;
  for (const auto& [name, list] : lists) {
    if (!list.is_array() || (list.empty() && !cls.input_is_list)) {
      return error{executor_errc::invalid_input,
                   "input '" + name + "' of " + cls.class_type +
                       " received an empty list: there is no item to call the node with"};
    }
    calls = std::max(calls, list.size());
  }
  if (cls.input_is_list) {
    json all = json::object();
    for (const auto& [name, list] : lists) all[name] = list;
    return std::vector<json>{std::move(all)};
  }
  std::vector<json> out(calls, json::object());
  for (std::size_t k = 0; k < calls; ++k) {
    for (const auto& [name, list] : lists) out[k][name] = list[std::min(k, list.size() - 1)];
  }
  return out;
}

result<json> merge_call_outputs(const runtime::node_class& cls,
                                const std::vector<json>& call_outputs) {
  json lists = json::array();
  for (std::size_t slot = 0; slot < cls.outputs.size(); ++slot) {
    const bool is_list = slot < cls.output_is_list.size() && cls.output_is_list[slot];
    json items = json::array();
    for (const json& outputs : call_outputs) {
      const json item = slot < outputs.size() ? outputs[slot] : json();
      if (!is_list) {
        items.push_back(item);
      } else if (item.is_array()) {
        for (const auto& i : item) items.push_back(i);
      } else {
        return error{executor_errc::invalid_output,
                     cls.class_type + " declares output " + std::to_string(slot) +
                         " OUTPUT_IS_LIST, but its worker returned " +
                         std::string(item.type_name()) + " there, not a list"};
      }
    }
    lists.push_back(std::move(items));
  }
  return lists;
}

}  // namespace orch::executor
