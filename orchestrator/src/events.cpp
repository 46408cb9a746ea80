#include "orch/orchestrator/events.hpp"

#include <iomanip>

namespace orch::orchestrator {

void text_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  out_ << std::left << std::setw(22) << type;
  for (auto it = data.begin(); it != data.end(); ++it) {
    if (it.key() == "timestamp") continue;
    out_ << ' ' << it.key() << '=' << (it->is_string() ? it->get<std::string>() : it->dump());
  }
  out_ << std::endl;
}

void json_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  out_ << nlohmann::json{{"type", type}, {"data", data}}.dump() << std::endl;
}

void recording_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  events_.push_back({{"type", type}, {"data", data}});
}

nlohmann::json recording_event_sink::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

}  // namespace orch::orchestrator
