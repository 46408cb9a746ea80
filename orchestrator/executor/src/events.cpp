#include "orch/executor/events.hpp"

#include <iomanip>

#include "orch/support/untrusted_text.hpp"

namespace orch::executor {
namespace {

// Event data carries a worker's text (a node's outputs, a fail() message), made valid UTF-8
// where the host decodes it (ipc message.cpp). Replacing on dump is the last line of defence:
// an event is never worth the host.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void text_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  out_ << std::left << std::setw(22) << type;
  for (auto it = data.begin(); it != data.end(); ++it) {
    if (it.key() == "timestamp") continue;
    // For a person's terminal: a pack's ANSI escapes and newlines are shown, not obeyed.
    out_ << ' ' << printable(it.key()) << '='
         << printable(it->is_string() ? it->get_ref<const std::string&>() : dump(*it));
  }
  out_ << std::endl;
}

void json_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  out_ << dump(nlohmann::json{{"type", type}, {"data", data}}) << std::endl;
}

void recording_event_sink::emit(const std::string& type, const nlohmann::json& data) {
  std::lock_guard lock(mutex_);
  events_.push_back({{"type", type}, {"data", data}});
}

nlohmann::json recording_event_sink::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

}  // namespace orch::executor
