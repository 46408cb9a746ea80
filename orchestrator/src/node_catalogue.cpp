#include "orch/orchestrator/node_catalogue.hpp"

namespace orch::orchestrator {

std::optional<std::string> node_catalogue::add(node_class cls) {
  auto it = classes_.find(cls.class_type);
  if (it != classes_.end()) {
    return "node class '" + cls.class_type + "' is provided by both env '" + it->second.env +
           "' and env '" + cls.env + "'; using '" + it->second.env + "'";
  }
  const std::string key = cls.class_type;
  classes_.emplace(key, std::move(cls));
  return std::nullopt;
}

nlohmann::json input_config(const node_input& in) {
  using nlohmann::json;
  json options = json::object();
  if (in.default_value) options["default"] = *in.default_value;
  if (in.min) options["min"] = *in.min;
  if (in.max) options["max"] = *in.max;
  const json type = in.type == "COMBO" ? json(in.options) : json(in.type);
  return options.empty() ? json::array({type}) : json::array({type, options});
}

nlohmann::json object_info(const node_class& cls) {
  using nlohmann::json;
  json required = json::object();
  json optional = json::object();
  json order = {{"required", json::array()}, {"optional", json::array()}};
  for (const auto& in : cls.inputs) {
    (in.required ? required : optional)[in.name] = input_config(in);
    order[in.required ? "required" : "optional"].push_back(in.name);
  }
  json inputs = {{"required", required}};
  if (!optional.empty()) inputs["optional"] = optional;
  if (!cls.hidden.empty()) {
    json hidden = json::object();
    for (const auto& h : cls.hidden) hidden[h] = h;
    inputs["hidden"] = hidden;
  }
  json output_is_list = json::array();
  for (std::size_t i = 0; i < cls.outputs.size(); ++i)
    output_is_list.push_back(i < cls.output_is_list.size() && cls.output_is_list[i]);
  return {{"input", inputs},
          {"input_order", order},
          {"output", cls.outputs},
          {"output_is_list", output_is_list},
          {"output_name", cls.outputs},
          {"name", cls.class_type},
          {"display_name", cls.display_name.empty() ? cls.class_type : cls.display_name},
          {"description", ""},
          {"python_module", "custom_nodes." + cls.env},
          {"category", cls.category},
          {"output_node", cls.output_node},
          {"orch_env", cls.env}};
}

const node_class* node_catalogue::find(const std::string& class_type) const {
  auto it = classes_.find(class_type);
  return it == classes_.end() ? nullptr : &it->second;
}

}  // namespace orch::orchestrator
