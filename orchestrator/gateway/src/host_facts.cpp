#include "orch/gateway/host_facts.hpp"

namespace orch::gateway {

using nlohmann::json;

void read_host_facts(fleet::host_view& view, const json& object_info, const json& system_stats) {
  if (object_info.is_object()) {
    view.node_classes.clear();
    for (const auto& [name, _] : object_info.items()) view.node_classes.insert(name);
  }
  if (system_stats.is_object()) {
    const auto devices = system_stats.find("devices");
    if (devices != system_stats.end() && devices->is_array() && !devices->empty()) {
      const auto& d = devices->front();
      if (auto free = d.find("vram_free"); free != d.end() && free->is_number_unsigned())
        view.free_device_bytes = free->get<std::uint64_t>();
    }
  }
  // Not in what serve answers today: the fingerprint (so "" for all) and resident models.
}

fleet::prompt_needs needs_of_prompt(const std::string& prompt_id, const json& prompt) {
  fleet::prompt_needs needs;
  needs.prompt_id = prompt_id;
  if (!prompt.is_object()) return needs;
  for (const auto& [_, node] : prompt.items())
    if (node.is_object())
      if (auto c = node.find("class_type"); c != node.end() && c->is_string())
        needs.node_classes.insert(c->get<std::string>());
  return needs;
}

}  // namespace orch::gateway
