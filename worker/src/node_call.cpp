#include "node_call.hpp"

#include <optional>
#include <vector>

#include "node_context.hpp"
#include "node_values.hpp"
#include "orch/ipc/errc.hpp"
#include "worker_errc.hpp"

namespace orch::worker {
namespace {

using nlohmann::json;

// The start of every node call: the prompt epoch (absent: the call is a prompt of its own).
// Ledger workers reset their cast buffers here when it changed (docs/memory-semantics.md).
void begin_node_call(const json& body, node_call_state& state) {
  std::optional<std::uint64_t> epoch;
  if (auto it = body.find("epoch"); it != body.end() && it->is_number_unsigned()) {
    epoch = it->get<std::uint64_t>();
    state.epoch.store(*epoch);
  }
  state.memory.begin_call();
  if (!state.memory.is_pager()) state.memory.cast_epoch_boundary(epoch);
}

// Pager workers release at each node boundary, failed or not (docs/memory-semantics.md).
struct node_boundary {
  explicit node_boundary(node_call_state& state) noexcept : state_(state) {}
  node_boundary(const node_boundary&) = delete;
  node_boundary& operator=(const node_boundary&) = delete;
  ~node_boundary() {
    if (state_.memory.is_pager()) state_.memory.release_node_boundary();
    state_.calls.fetch_add(1);
  }
  node_call_state& state_;
};

}  // namespace

json run_node_call(const node_set& nodes, const json& body, node_call_state& state) {
  const std::string node_id = body["node"].get<std::string>();
  const std::string class_type = body["class_type"].get<std::string>();
  auto fail = [&](const std::string& type, const std::string& message) {
    return json{{"status", "error"},
                {"error", {{"node", node_id}, {"type", type}, {"message", message}}}};
  };
  const node_class* cls = nodes.find(class_type);
  if (cls == nullptr)
    return fail(ipc::node_error_type::missing_node_type, class_type + " is not in this pack");
  // The node itself, or one of ComfyUI's class methods (nodes.h, ABI 1.2): no epoch, no node
  // boundary, no defaults for absent (linked) inputs, no interrupt, no tensors.
  const auto method = body.find("method");
  const bool node_call = method == body.end();
  orch_node_execute_fn fn = cls->decl->execute;
  if (!node_call) {
    const std::string name = method->is_string() ? method->get<std::string>() : "";
    fn = name == "VALIDATE_INPUTS" ? cls->validate_inputs
         : name == "IS_CHANGED"    ? cls->is_changed
                                   : nullptr;
    if (fn == nullptr)
      return fail(ipc::node_error_type::missing_node_type,
                  class_type + " has no class method " + method->dump());
  } else {
    begin_node_call(body, state);
  }
  value_storage storage;
  auto decoded = decode_inputs(*cls, body["inputs"], state.memory.segments(), storage,
                               /*defaults=*/node_call);
  if (!decoded) return fail(ipc::node_error_type::invalid_input, decoded.err().message);
  std::vector<orch_value>& inputs = decoded->values;
  node_call_hooks hooks;
  if (auto it = body.find("hidden"); it != body.end()) hooks.hidden = &*it;
  hooks.allocate = [&state, node_call](std::uint64_t size) -> result<ipc::buffer_descriptor> {
    if (!node_call) {
      return error{worker_errc::not_in_class_method,
                   "VALIDATE_INPUTS and IS_CHANGED cannot allocate output tensors"};
    }
    return state.allocate(size);
  };
  hooks.progress = [&state, node_id](std::uint64_t value, std::uint64_t max) {
    state.progress(node_id, value, max);
  };
  // A class method belongs to no prompt, so no interrupt (of a past prompt or of the one it
  // precedes) applies to it: epoch 1 against an interrupted epoch that stays 0.
  static const std::atomic<std::uint64_t> never_interrupted{0};
  node_context_impl ctx(state.memory, std::move(hooks), node_id,
                        node_call ? state.epoch.load() : 1,
                        node_call ? state.interrupted_epoch : never_interrupted);
  std::vector<orch_value> outputs(node_call ? cls->decl->output_count : 1);
  orch_node_status status;
  if (node_call) {
    node_boundary boundary(state);
    status = fn(ctx.context(), inputs.data(), outputs.data());
  } else {
    status = fn(ctx.context(), inputs.data(), outputs.data());
  }
  auto allocated = json::array();
  for (const auto& d : ctx.allocations()) allocated.push_back(ipc::descriptor_to_json(d));
  if (status == ORCH_NODE_INTERRUPTED) {
    json r = fail(ipc::node_error_type::interrupted, "the prompt was interrupted");
    r["allocations"] = std::move(allocated);
    return r;
  }
  if (status != ORCH_NODE_OK) {
    json r = fail(ctx.error_type().empty() ? ipc::node_error_type::node_error : ctx.error_type(),
                  ctx.error_message().empty() ? class_type + " failed" : ctx.error_message());
    r["allocations"] = std::move(allocated);
    if (!ctx.error_traceback().empty()) r["error"]["traceback"] = ctx.error_traceback();
    // A model the device could not hold: the host may evict through its stand-ins and retry.
    if (state.memory.last_required() > 0) r["error"]["required"] = state.memory.last_required();
    r["models"] = state.memory.describe_models();
    return r;
  }
  auto out = json::array();
  for (const auto& v : outputs) out.push_back(value_to_json(v));
  json r = {{"status", "ok"},
            {"outputs", std::move(out)},
            {"inputs_seen", std::move(decoded->seen)},
            {"allocations", std::move(allocated)},
            {"models", state.memory.describe_models()}};
  if (ctx.ui().is_object()) r["ui"] = ctx.ui();
  if (ctx.expand().is_object()) r["expand"] = ctx.expand();
  return r;
}

}  // namespace orch::worker
