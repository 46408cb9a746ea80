#include "orch/executor/execution_messages.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "orch/executor/errc.hpp"
#include "orch/ipc/errc.hpp"

namespace orch::executor {
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

// A Python exception's type name (ComfyUI's full_type_name: "ValueError",
// "torch.OutOfMemoryError"), as opposed to one of comfy-orch's snake_case error codes.
bool is_python_type_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  bool upper = false;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '_' && c != '.') return false;
    upper = upper || std::isupper(u);
  }
  return upper;
}

// The Python exception ComfyUI would have reported for what comfy-orch's code names.
std::string python_type_for(const std::string& code) {
  if (code == ipc::node_error_type::out_of_memory) return "torch.OutOfMemoryError";
  if (code == ipc::node_error_type::invalid_input || code == executor_errc::invalid_output)
    return "ValueError";
  if (code == ipc::node_error_type::missing_node_type) return "KeyError";
  // A pack's own snake_case exception name (a native node's fail("value_error", ...)): the
  // Python spelling of it.
  const std::string suffix = "_error";
  const bool snake = std::all_of(code.begin(), code.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (snake && code != ipc::node_error_type::node_error && code.size() > suffix.size() &&
      code.compare(code.size() - suffix.size(), suffix.size(), suffix) == 0) {
    std::string camel;
    bool up = true;
    for (const char c : code) {
      if (c == '_') {
        up = true;
        continue;
      }
      camel += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    return camel;
  }
  return "RuntimeError";  // a worker that died, a deadline, a channel or pack failure, ...
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
  // ComfyUI's exception_type is a Python type name; comfy-orch's own code, where it has one
  // (worker_died, deadline_exceeded, out_of_memory, ...), goes beside it.
  if (auto it = error.find("exception_type"); it != error.end() && it->is_string()) {
    const std::string code = it->get<std::string>();
    if (!is_python_type_name(code)) {
      *it = python_type_for(code);
      error["orch_error_type"] = code;
    }
  }
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

}  // namespace orch::executor
