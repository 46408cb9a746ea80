#include "orch/fleet/prompt_needs.hpp"

#include <string>
#include <utility>

#include "orch/executor/model_inputs.hpp"

namespace orch::fleet {

namespace {

constexpr std::size_t max_name_bytes = 1024;  // a class name's, as the host report's names

}  // namespace

prompt_needs_reading prompt_needs_of(const nlohmann::json& prompt, std::string prompt_id,
                                     std::size_t max_nodes) {
  const auto refuse = [](std::string why) {
    return prompt_needs_reading{std::nullopt, std::move(why)};
  };
  if (!prompt.is_object()) return refuse("the prompt is not an object of nodes");
  if (prompt.size() > max_nodes)
    return refuse("the prompt has " + std::to_string(prompt.size()) + " nodes, more than " +
                  std::to_string(max_nodes));
  prompt_needs needs;
  needs.prompt_id = std::move(prompt_id);
  for (const auto& [id, node] : prompt.items()) {
    const std::string where = "node " + (id.size() > 64 ? id.substr(0, 64) + "..." : id);
    if (!node.is_object()) return refuse(where + ": not an object");
    const auto cls = node.find("class_type");
    if (cls == node.end() || !cls->is_string()) return refuse(where + ": class_type: not a string");
    const auto& class_type = cls->get_ref<const std::string&>();
    if (class_type.empty() || class_type.size() > max_name_bytes)
      return refuse(where + ": class_type: empty or longer than 1 KiB");
    needs.node_classes.insert(class_type);
    const auto inputs = node.find("inputs");
    if (inputs == node.end()) continue;
    if (!inputs->is_object()) return refuse(where + ": inputs: not an object");
    for (auto& model : executor::model_names_of(class_type, *inputs))
      needs.models.insert(std::move(model));
  }
  return {std::move(needs), {}};
}

}  // namespace orch::fleet
