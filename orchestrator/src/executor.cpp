#include "orch/orchestrator/executor.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "checked_call.hpp"
#include "execution_messages.hpp"
#include "hidden_values.hpp"
#include "json_fields.hpp"

#include "orch/orchestrator/errc.hpp"
#include "orch/orchestrator/list_mapping.hpp"
#include "orch/orchestrator/prompt_validation.hpp"

namespace orch::orchestrator {
namespace {

using nlohmann::json;

// ComfyUI ends every prompt, whatever its outcome, with an `executing` for no node; clients
// wait for it to know the prompt is over.
class prompt_end {
 public:
  prompt_end(event_sink& events, const std::string& prompt_id)
      : events_(events), prompt_id_(prompt_id) {}
  prompt_end(const prompt_end&) = delete;
  prompt_end& operator=(const prompt_end&) = delete;
  ~prompt_end() {
    try {
      events_.emit("executing", {{"node", nullptr}, {"prompt_id", prompt_id_}});
    } catch (...) {
      spdlog::error("executor: the end of prompt {} could not be sent", prompt_id_);
    }
  }

 private:
  event_sink& events_;
  const std::string& prompt_id_;
};

// The ids of the nodes whose outputs this prompt has (ComfyUI's current_outputs).
json executed_ids(const prompt_outcome& outcome) {
  json ids = json::array();
  for (const auto& [id, node] : outcome.nodes) ids.push_back(id);
  return ids;
}

}  // namespace

executor::~executor() {
  release_outputs();
  // The progress callback refers to this executor: a worker's late progress message must not
  // reach it once it is gone. After the host's shutdown the supervisor, and the callback, are gone.
  if (progress_hooked_ && !host_.stopped()) {
    try {
      host_.on_io_thread([this] { host_.workers().on_progress = nullptr; });
    } catch (...) {
      spdlog::error("executor: unhooking progress failed");
    }
  }
}

void executor::release_outputs() noexcept {
  if (held_.empty()) return;
  try {
    host_.on_io_thread([this] {
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
  host_.on_io_thread([&] { host_.workers().interrupt(epoch); });
}

result<json> executor::call_node(const std::string& env, const json& body) {
  // Only what a node of this prompt produced reaches a worker as a tensor.
  auto c = checked_call(host_, env, body, held_);
  held_.insert(held_.end(), c.handed.begin(), c.handed.end());
  return std::move(c.response);
}

result<json> executor::call_with_retry(const std::string& env, const json& body) {
  auto c = orchestrator::call_with_retry(host_, env, body, held_);
  held_.insert(held_.end(), c.handed.begin(), c.handed.end());
  return std::move(c.response);
}

std::optional<json> executor::run_node(const prompt& p, const std::string& id,
                                       const node_class& cls,
                                       const std::map<std::string, json>& lists,
                                       std::uint64_t epoch, node_outcome& n) {
  auto calls = call_inputs(cls, lists);
  if (!calls)
    return json{{"exception_type", calls.err().code}, {"exception_message", calls.err().message}};
  // The same for every call of the node: built (and checked) once.
  const json hidden = hidden_values(p, cls, id);
  std::vector<json> call_outputs;
  for (json& inputs : *calls) {
    json body{{"node", id},
              {"class_type", cls.class_type},
              {"epoch", epoch},
              {"inputs", std::move(inputs)}};
    if (!hidden.empty()) body["hidden"] = hidden;
    const auto call_start = std::chrono::steady_clock::now();
    result<json> r = call_with_retry(cls.env, body);
    n.call_us +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - call_start)
            .count();
    if (!r) return json{{"exception_type", r.err().code}, {"exception_message", r.err().message}};
    if ((*r).value("status", "") != "ok") {
      const json& e = (*r)["error"];  // an object: ipc::check_call_response
      const std::string type = text_field(e, "type");
      return json{{"exception_type", type.empty() ? ipc::node_error_type::node_error : type},
                  {"exception_message", text_field(e, "message")},
                  {"traceback", traceback_lines(e)}};
    }
    call_outputs.push_back(std::move((*r)["outputs"]));
    n.inputs_seen = (*r).value("inputs_seen", json::object());
  }
  auto merged = merge_call_outputs(cls, call_outputs);
  if (!merged) {
    return json{{"exception_type", merged.err().code}, {"exception_message", merged.err().message}};
  }
  n.output_lists = std::move(*merged);
  n.outputs = call_outputs.size() == 1 ? std::move(call_outputs[0]) : n.output_lists;
  return std::nullopt;
}

prompt_outcome executor::run(const prompt& p, const std::vector<std::string>& outputs,
                             const std::string& prompt_id) {
  release_outputs();
  prompt_outcome outcome;
  outcome.prompt_id = prompt_id;
  outcome.epoch = epoch_.fetch_add(1) + 1;
  const auto& catalogue = host_.catalogue();
  progress_hooked_ = true;
  host_.on_io_thread([&] {
    host_.workers().on_progress = [this, prompt_id](const std::string&, const json& pr) {
      events_.emit("progress", {{"value", pr["value"]},
                                {"max", pr["max"]},
                                {"prompt_id", prompt_id},
                                {"node", pr["node"]}});
    };
  });
  events_.emit("execution_start", {{"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  // ComfyUI sends the cached nodes next, an empty list when none are: nothing is kept across
  // prompts yet.
  events_.emit("execution_cached",
               {{"nodes", json::array()}, {"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  const prompt_end end(events_, prompt_id);
  json executed = json::array();
  for (const auto& id : execution_order(p, outputs)) {
    const prompt_node& node = p.nodes.at(id);
    const node_class* cls = catalogue.find(node.class_type);
    if (cls == nullptr) {  // validation prevents this; kept as a typed error, never a crash
      outcome.error = json{{"prompt_id", prompt_id}, {"node_id", id},
                           {"node_type", node.class_type}, {"executed", executed},
                           {"exception_type", "missing_node_type"},
                           {"exception_message", node.class_type + " is provided by no pack"}};
      events_.emit("execution_error",
                   error_message(*outcome.error, json::object(), executed_ids(outcome)));
      return outcome;
    }
    // ComfyUI checks for an interrupt before each node too: the rest of the prompt never runs.
    if (interrupted_.load()) {
      outcome.error = json{{"prompt_id", prompt_id},
                           {"node_id", id},
                           {"node_type", node.class_type},
                           {"executed", executed},
                           {"exception_type", ipc::node_error_type::interrupted},
                           {"exception_message", "the prompt was interrupted"}};
      events_.emit("execution_interrupted", interrupted_message(*outcome.error));
      return outcome;
    }
    events_.emit("executing", {{"node", id}, {"display_node", id}, {"prompt_id", prompt_id}});
    // Every value between nodes is a list of items (list_mapping.hpp): a literal is one item.
    std::map<std::string, json> lists;
    for (const auto& [name, value] : node.inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) {
        lists[name] =
            outcome.nodes.at(link->node_id).output_lists.at(static_cast<std::size_t>(link->slot));
      } else {
        lists[name] = json::array({std::get<json>(value)});
      }
    }
    node_outcome n{node.class_type,          cls->env, json::array(),
                   json::object(),           0,        json::array(),
                   change_key(p, node, *cls)};
    std::optional<json> error_data = run_node(p, id, *cls, lists, outcome.epoch, n);
    if (error_data) {
      (*error_data)["prompt_id"] = prompt_id;
      (*error_data)["node_id"] = id;
      (*error_data)["node_type"] = node.class_type;
      (*error_data)["executed"] = executed;
      if (!error_data->contains("traceback")) (*error_data)["traceback"] = json::array();
      const bool interrupted = (*error_data)["exception_type"] == ipc::node_error_type::interrupted;
      outcome.error = *error_data;
      if (interrupted) {
        events_.emit("execution_interrupted", interrupted_message(*error_data));
      } else {
        events_.emit("execution_error", error_message(*error_data, current_inputs(lists),
                                                      executed_ids(outcome)));
      }
      return outcome;
    }
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
