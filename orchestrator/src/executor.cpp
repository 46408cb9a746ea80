#include "orch/orchestrator/executor.hpp"

#include <chrono>
#include <future>

#include <spdlog/spdlog.h>

#include "json_fields.hpp"
#include "output_tensors.hpp"

#include "orch/orchestrator/prompt_validation.hpp"

namespace orch::orchestrator {
namespace {

using nlohmann::json;

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

void collect(const json& v, std::vector<ipc::buffer_descriptor>& out) {
  if (v.is_array()) {
    for (const auto& x : v) collect(x, out);
  } else if (v.is_object() && v.contains("tensor") && v["tensor"].is_object() &&
             v["tensor"].contains("descriptor")) {
    auto d = ipc::descriptor_from_json(v["tensor"]["descriptor"]);
    if (d) out.push_back(*d);
  }
}

// A call response has the shape of docs/protocol.md, or it is refused: a worker is a process we
// do not trust, and nothing below may throw on the io thread.
result<json> checked_response(result<json> r) {
  if (!r) return r;
  const json& b = *r;
  const bool ok_shape =
      b.is_object() && b.contains("status") && b["status"].is_string() &&
      (b["status"] != "ok" || (b.contains("outputs") && b["outputs"].is_array())) &&
      (b["status"] == "ok" || (b.contains("error") && b["error"].is_object())) &&
      (!b.contains("allocations") || b["allocations"].is_array()) &&
      (!b.contains("inputs_seen") || b["inputs_seen"].is_object());
  if (!ok_shape) return error{"bad_response", "the worker answered a call with a malformed body"};
  return r;
}

}  // namespace

std::vector<ipc::buffer_descriptor> tensor_descriptors(const json& values) {
  std::vector<ipc::buffer_descriptor> out;
  collect(values, out);
  return out;
}

executor::~executor() {
  release_outputs();
}

void executor::release_outputs() noexcept {
  if (held_.empty()) return;
  try {
    host_.sync([this] {
      for (const auto& d : held_) (void)host_.memory().leases().release(d, host_slot);
    });
  } catch (...) {
    spdlog::error("executor: releasing outputs failed");
  }
  held_.clear();
}

void executor::interrupt() {
  interrupted_.store(true);
  const std::uint64_t epoch = epoch_.load();
  host_.sync([&] { host_.workers().interrupt(epoch); });
}

result<json> executor::call_node(const std::string& env, const json& body) {
  std::promise<result<json>> done;
  auto future = done.get_future();
  host_.sync([&] {
    // Only what a node of this prompt produced reaches a worker as a tensor (issue 10): a tensor
    // typed into the prompt could name any block the host holds.
    if (auto st = check_input_tensors(body.value("inputs", json::object()),
                                      host_.memory().leases(), host_slot, held_);
        !st) {
      return done.set_value(st.err());
    }
    host_.workers().call(env, body, [this, &done, env, &body](result<json> response) {
      result<json> r = checked_response(std::move(response));
      // Leases move here, on the io thread, before anyone sees the result: each block the node
      // returned becomes the host's; each one it allocated and dropped goes back.
      if (r && host_.workers().find(env) != nullptr) {
        const std::uint32_t slot = host_.workers().find(env)->slot;
        const auto returned = tensor_descriptors(r->value("outputs", json::array()));
        for (const auto& a : r->value("allocations", json::array())) {
          auto d = ipc::descriptor_from_json(a);
          if (!d) continue;
          const bool kept = (*r)["status"] == "ok" &&
                            std::find(returned.begin(), returned.end(), *d) != returned.end();
          if (kept) (void)host_.memory().leases().acquire(*d, host_slot);
          (void)host_.memory().leases().free(*d, slot);
          if (kept) held_.push_back(*d);
        }
      }
      // Before any consumer sees them, the producer's tensors must fit the blocks the host holds
      // for them (issue 10): a lie is this node's error, not a crash in the next worker.
      if (r && (*r)["status"] == "ok") {
        const std::string producer = "node " + text_field(body, "node") + " (" +
                                     text_field(body, "class_type") + ", env " + env + ")";
        auto st = check_output_tensors((*r)["outputs"], host_.memory().leases(), host_slot,
                                       producer);
        if (!st) r = st.err();
      }
      done.set_value(std::move(r));
    });
  });
  return future.get();
}

prompt_outcome executor::run(const prompt& p, const std::vector<std::string>& outputs,
                             const std::string& prompt_id) {
  release_outputs();
  prompt_outcome outcome;
  outcome.prompt_id = prompt_id;
  outcome.epoch = epoch_.fetch_add(1) + 1;
  const auto& catalogue = host_.catalogue();
  std::map<std::string, std::string> node_of_env;
  host_.sync([&] {
    host_.workers().on_progress = [this, prompt_id](const std::string&, const json& pr) {
      events_.emit("progress", {{"value", pr["value"]},
                                {"max", pr["max"]},
                                {"prompt_id", prompt_id},
                                {"node", pr["node"]}});
    };
  });
  events_.emit("execution_start", {{"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  json executed = json::array();
  for (const auto& id : execution_order(p, outputs)) {
    const prompt_node& node = p.nodes.at(id);
    const node_class* cls = catalogue.find(node.class_type);
    if (cls == nullptr) {  // validation prevents this; kept as a typed error, never a crash
      outcome.error = json{{"prompt_id", prompt_id}, {"node_id", id},
                           {"node_type", node.class_type}, {"executed", executed},
                           {"exception_type", "missing_node_type"},
                           {"exception_message", node.class_type + " is provided by no pack"}};
      events_.emit("execution_error", *outcome.error);
      return outcome;
    }
    // ComfyUI checks for an interrupt before each node too: the rest of the prompt never runs.
    if (interrupted_.load()) {
      outcome.error = json{{"prompt_id", prompt_id}, {"node_id", id},
                           {"node_type", node.class_type}, {"executed", executed},
                           {"exception_type", "interrupted"},
                           {"exception_message", "the prompt was interrupted"}};
      events_.emit("execution_interrupted", *outcome.error);
      return outcome;
    }
    events_.emit("executing", {{"node", id}, {"display_node", id}, {"prompt_id", prompt_id}});
    json inputs = json::object();
    for (const auto& [name, value] : node.inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) {
        const auto& src = outcome.nodes.at(link->node_id).outputs;
        inputs[name] = src.at(static_cast<std::size_t>(link->slot));
      } else {
        inputs[name] = std::get<json>(value);
      }
    }
    json body{{"node", id}, {"class_type", node.class_type}, {"epoch", outcome.epoch},
              {"inputs", std::move(inputs)}};
    const auto call_start = std::chrono::steady_clock::now();
    const std::string env = cls->env;
    result<json> r = call_node(env, body);
    // A model the device could not hold: ComfyUI's free_memory across every process's models
    // (the stand-ins), then the node once more (DESIGN.md §4.7).
    static const json no_response;
    const json& failure = object_field(r ? *r : no_response, "error");
    const std::uint64_t required =
        text_field(failure, "type") == "out_of_memory" ? unsigned_field(failure, "required") : 0;
    if (required > 0) {
      std::uint64_t freed = 0;
      for (const auto& step : host_.free_through_stand_ins(env, required)) freed += step.freed;
      spdlog::info("node {} ({}) needs {} bytes on the device: {} freed through stand-ins{}", id,
                   node.class_type, required, freed, freed > 0 ? ", retrying" : "");
      if (freed > 0) r = call_node(env, body);
    }
    const double call_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - call_start)
            .count();
    json error_data;
    if (!r) {
      error_data = {{"exception_type", r.err().code}, {"exception_message", r.err().message}};
    } else if ((*r).value("status", "") != "ok") {
      const json& e = (*r)["error"];  // an object: checked_response
      const std::string type = text_field(e, "type");
      error_data = {{"exception_type", type.empty() ? "node_error" : type},
                    {"exception_message", text_field(e, "message")}};
    }
    if (!error_data.is_null()) {
      error_data["prompt_id"] = prompt_id;
      error_data["node_id"] = id;
      error_data["node_type"] = node.class_type;
      error_data["executed"] = executed;
      error_data["traceback"] = json::array();
      const bool interrupted = error_data["exception_type"] == "interrupted";
      outcome.error = error_data;
      events_.emit(interrupted ? "execution_interrupted" : "execution_error", error_data);
      return outcome;
    }
    node_outcome n{node.class_type, env, (*r)["outputs"], (*r).value("inputs_seen", json::object()),
                   call_us};
    if (cls->output_node) {
      events_.emit("executed", {{"node", id}, {"display_node", id},
                                {"output", {{"outputs", n.outputs}}}, {"prompt_id", prompt_id}});
    }
    outcome.nodes[id] = std::move(n);
    executed.push_back(id);
  }
  outcome.ok = true;
  events_.emit("execution_success", {{"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  return outcome;
}

}  // namespace orch::orchestrator
