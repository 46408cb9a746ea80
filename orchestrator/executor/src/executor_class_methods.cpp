// The executor's forwarding of ComfyUI's class methods to a class's worker (docs/nodes.md,
// "ABI 1.2"): VALIDATE_INPUTS while a prompt is validated, IS_CHANGED before a node runs. Both
// get the node's literal inputs only, and the hidden values the class declares.
#include "orch/executor/executor.hpp"

#include "hidden_values.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::executor {
namespace {

using nlohmann::json;

// A class method's call: literal inputs as ComfyUI passes them (each in a list for a class with
// INPUT_IS_LIST, as its node calls carry them), and the hidden values plus `extra_hidden`.
json method_call(const prompt& p, const std::string& id, const runtime::node_class& cls,
                 const char* method, const json& literals, json extra_hidden) {
  json inputs = json::object();
  for (const auto& [name, value] : literals.items()) {
    inputs[name] = cls.input_is_list ? json::array({value}) : value;
  }
  json hidden = hidden_values(p, cls, id);
  for (auto& [kind, value] : extra_hidden.items()) hidden[kind] = std::move(value);
  json body{{"node", id},
            {"class_type", cls.class_type},
            {"method", method},
            {"inputs", std::move(inputs)}};
  if (!hidden.empty()) body["hidden"] = std::move(hidden);
  return body;
}

}  // namespace

custom_validation executor::worker_validation() {
  return [this](const prompt& p, const std::string& id, const runtime::node_class& cls,
                const json& literals, const json& input_types) -> std::optional<validation_error> {
    auto r = call_node(cls.env, method_call(p, id, cls, "VALIDATE_INPUTS", literals,
                                            {{"INPUT_TYPES", input_types}}));
    if (r && (*r).value("status", "") == "ok") return std::nullopt;
    // The method's verdict, or ComfyUI's error for a method that raised (or could not run).
    const json error =
        r ? (*r)["error"] : json{{"type", r.err().code}, {"message", r.err().message}};
    const std::string type = text_field(error, "type");
    const std::string message = text_field(error, "message");
    if (type == "custom_validation_failed") {
      return validation_error{type, "Custom validation failed for node", message, json::object()};
    }
    return validation_error{"exception_during_validation",
                            "Exception when validating node",
                            message,
                            {{"exception_type", type}, {"traceback", traceback_lines(error)}}};
  };
}

boost::asio::awaitable<std::optional<json>> executor::change_key(const prompt& p,
                                                                 const prompt_node& node,
                                                                 const runtime::node_class& cls) {
  if (!cls.is_changed) co_return json();
  json literals = json::object();
  for (const auto& [name, value] : node.inputs) {
    if (const auto* literal = std::get_if<json>(&value)) literals[name] = *literal;
  }
  const json body = method_call(p, node.id, cls, "IS_CHANGED", literals, {});
  auto r = co_await call_node_async(cls.env, body);
  if (!r || (*r).value("status", "") != "ok") co_return std::nullopt;
  const json& outputs = (*r)["outputs"];  // an array: ipc::check_call_response
  co_return outputs.empty() ? json() : outputs[0];
}

}  // namespace orch::executor
