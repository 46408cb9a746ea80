// Objects across envs under `run` and `serve` (docs/comfyui.md, "Objects across envs"): an
// object a Python worker keeps crosses as a handle string; a node of another env gets instead
// what the owner's internal class orch.export:<env> gives for it, as ComfyUI's side does
// (python/comfy_orch/comfyui/_handover.py).
#include "orch/executor/executor.hpp"

#include "orch/ipc/errc.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::executor {
namespace {

using nlohmann::json;

// comfy_orch's handle strings: this prefix, then env:pid:n:type (worker/_values.py).
constexpr std::string_view handle_prefix = "comfy_orch.handle:";
constexpr std::string_view export_prefix = "orch.export:";
// How many objects one call may have handed over: each is a call to its owner.
constexpr std::size_t max_handovers = 256;

// The env a handle names, or empty for a string that is no handle.
std::string owner_of(const json& value) {
  if (!value.is_string()) return {};
  const auto& text = value.get_ref<const std::string&>();
  if (text.compare(0, handle_prefix.size(), handle_prefix) != 0) return {};
  const auto end = text.find(':', handle_prefix.size());
  return end == std::string::npos ? std::string()
                                  : text.substr(handle_prefix.size(), end - handle_prefix.size());
}

// Every place in `value` (lists and dict values, as values nest) holding another env's handle.
void foreign_handles(json& value, const std::string& env, std::vector<json*>& out) {
  if (const std::string owner = owner_of(value); !owner.empty()) {
    if (owner != env) out.push_back(&value);
  } else if (value.is_array()) {
    for (auto& item : value) foreign_handles(item, env, out);
  } else if (value.is_object()) {
    if (auto it = value.find("dict"); it != value.end() && it->is_object()) {
      for (auto& item : *it) foreign_handles(item, env, out);
    }
  }
}

}  // namespace

boost::asio::awaitable<std::optional<json>> executor::hand_over_objects(
    json& inputs, const runtime::node_class& cls, const std::string& id, std::uint64_t epoch) {
  std::vector<json*> found;
  for (auto& [name, value] : inputs.items()) foreign_handles(value, cls.env, found);
  if (found.size() > max_handovers) {
    co_return json{{"exception_type", "TypeError"},
                   {"exception_message", "node " + id + " takes " + std::to_string(found.size()) +
                                             " objects of other envs; at most " +
                                             std::to_string(max_handovers) + " cross"}};
  }
  for (json* place : found) {
    if (auto done = handed_over_.find(place->get<std::string>()); done != handed_over_.end()) {
      *place = done->second;
      continue;
    }
    const std::string owner = owner_of(*place);
    const std::string exporter = std::string(export_prefix) + owner;
    if (host_.catalogue().find_internal(exporter) == nullptr) {
      co_return json{{"exception_type", "TypeError"},
                     {"exception_message",
                      "node " + id + " (" + cls.class_type + ") takes an object of env '" +
                          owner + "', whose worker cannot hand it to env '" + cls.env +
                          "' (it is no Python worker of this comfy-orch); run both nodes in "
                          "one env"}};
    }
    json body{{"node", id},
              {"class_type", exporter},
              {"epoch", epoch},
              {"inputs", {{"value", *place}}}};
    std::vector<ipc::buffer_descriptor> exported;
    result<json> r = co_await call_with_retry(owner, body, exported);
    // The pickle's block: readable by the node it is for, and released with the prompt (the
    // node gets the object it carries, not the block).
    owned_.insert(owned_.end(), exported.begin(), exported.end());
    readable_.insert(readable_.end(), exported.begin(), exported.end());
    if (!r)
      co_return json{{"exception_type", r.err().code}, {"exception_message", r.err().message}};
    if ((*r).value("status", "") != "ok") {
      const json& e = (*r)["error"];
      const std::string type = text_field(e, "type");
      co_return json{{"exception_type", type.empty() ? ipc::node_error_type::node_error : type},
                     {"exception_message", text_field(e, "message")}};
    }
    const json& outputs = (*r)["outputs"];
    if (!outputs.is_array() || outputs.empty()) {
      co_return json{{"exception_type", "TypeError"},
                     {"exception_message", "env '" + owner + "' handed over nothing for " +
                                               place->get<std::string>()}};
    }
    handed_over_[place->get<std::string>()] = outputs[0];
    *place = outputs[0];
  }
  co_return std::nullopt;
}

}  // namespace orch::executor
