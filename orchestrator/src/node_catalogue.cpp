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

const node_class* node_catalogue::find(const std::string& class_type) const {
  auto it = classes_.find(class_type);
  return it == classes_.end() ? nullptr : &it->second;
}

}  // namespace orch::orchestrator
