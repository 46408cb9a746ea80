#include "execution_messages.hpp"

#include <chrono>

namespace orch::orchestrator {
namespace {

using nlohmann::json;

json format_item(const json& item) {
  if (item.is_object()) {
    const auto t = item.find("tensor");
    if (t != item.end() && t->is_object()) {
      return "tensor(shape=" + t->value("shape", json::array()).dump() +
             ", dtype=" + t->value("dtype", json(nullptr)).dump() + ")";
    }
  }
  return item;
}

}  // namespace

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

json current_inputs(const std::map<std::string, json>& lists) {
  json out = json::object();
  for (const auto& [name, items] : lists) {
    json shown = json::array();
    if (items.is_array()) {
      for (const auto& item : items) shown.push_back(format_item(item));
    }
    out[name] = std::move(shown);
  }
  return out;
}

json error_message(json error, const json& inputs, const json& outputs) {
  error["current_inputs"] = inputs;
  error["current_outputs"] = outputs;
  error["timestamp"] = now_ms();
  return error;
}

json interrupted_message(const json& error) {
  json out = json::object();
  for (const char* key : {"prompt_id", "node_id", "node_type", "executed"}) {
    if (const auto it = error.find(key); it != error.end()) out[key] = *it;
  }
  out["timestamp"] = now_ms();
  return out;
}

}  // namespace orch::orchestrator
