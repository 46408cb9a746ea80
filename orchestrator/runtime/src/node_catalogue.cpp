#include "orch/runtime/node_catalogue.hpp"

namespace orch::runtime {

std::optional<std::string> node_catalogue::add(node_class cls) {
  if (cls.route.is_object()) {
    const std::string said = cls.route.value("method", "") + " " + cls.route.value("path", "");
    auto by_path = route_paths_.find(said);
    auto by_type = routes_.find(cls.class_type);
    if (by_path != route_paths_.end() || by_type != routes_.end()) {
      const std::string& first = by_type != routes_.end() ? by_type->second.env : by_path->second;
      return "route " + said + " is declared by both env '" + first + "' and env '" + cls.env +
             "'; using '" + first + "'";
    }
    route_paths_.emplace(said, cls.env);
    const std::string key = cls.class_type;
    routes_.emplace(key, std::move(cls));
    return std::nullopt;
  }
  if (cls.internal) {
    const std::string key = cls.class_type;
    if (!internal_.emplace(key, std::move(cls)).second)
      return "internal class '" + key + "' is provided twice; using the first";
    return std::nullopt;
  }
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
  // An INT's bounds are integers in ComfyUI's schema (a frontend shows 1.0 otherwise).
  const auto bound = [&](double v) {
    return in.type == "INT" && v == static_cast<double>(static_cast<std::int64_t>(v))
               ? json(static_cast<std::int64_t>(v))
               : json(v);
  };
  json options = json::object();
  if (in.default_value) options["default"] = *in.default_value;
  if (in.min) options["min"] = bound(*in.min);
  if (in.max) options["max"] = bound(*in.max);
  const json type = in.type == "COMBO" ? json(in.options) : json(in.type);
  return options.empty() ? json::array({type}) : json::array({type, options});
}

nlohmann::json object_info(const node_class& cls) {
  using nlohmann::json;
  if (cls.node_info.is_object()) {
    json out = cls.node_info;
    out["orch_env"] = cls.env;
    return out;
  }
  json inputs = {{"required", json::object()}};
  // input_order lists each group's names in declaration order, as ComfyUI's does (a JSON
  // object's keys come out sorted).
  json order = {{"required", json::array()}};
  for (const auto& in : cls.inputs) {
    const char* group = in.required ? "required" : "optional";
    inputs[group][in.name] = input_config(in);
    order[group].push_back(in.name);
  }
  if (!cls.hidden.empty()) {
    for (const auto& h : cls.hidden) {
      inputs["hidden"][h] = h;
      order["hidden"].push_back(h);
    }
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

const node_class* node_catalogue::find_route(const std::string& class_type) const {
  auto it = routes_.find(class_type);
  return it == routes_.end() ? nullptr : &it->second;
}

const node_class* node_catalogue::find_internal(const std::string& class_type) const {
  auto it = internal_.find(class_type);
  return it == internal_.end() ? nullptr : &it->second;
}

}  // namespace orch::runtime
