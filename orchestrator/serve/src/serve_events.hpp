// serve_events: comfy_api's event sink (serve_api.hpp): where the executor's events of a prompt
// go (the WebSocket clients, as ComfyUI routes them) and what the prompt's history entry keeps.
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "orch/serve/serve_api.hpp"

namespace orch::orchestrator {

// What the executor says goes to the client that queued the prompt (see emit), and the status
// messages and UI outputs into the prompt's history entry.
class comfy_api::events final : public event_sink {
  using json = nlohmann::json;

 public:
  explicit events(http_server& server) : server_(server) {}

  void begin(const std::string& client_id) {
    std::lock_guard lock(mutex_);
    client_id_ = client_id;
    running_node_.clear();
    messages_ = json::array();
    outputs_ = json::object();
    progress_ = json::object();
    running_nodes_.clear();
  }
  // The history's outputs and status of the prompt that just ended.
  std::pair<json, json> end(bool ok) {
    std::lock_guard lock(mutex_);
    json status = {{"status_str", ok ? "success" : "error"},
                   {"completed", ok},
                   {"messages", messages_}};
    return {outputs_, status};
  }

  // ComfyUI's progress_state of the prompt that client `sid` queued, whole, for a client that
  // connects while it runs; only its running nodes when the whole would pass 1 MiB.
  std::optional<std::string> progress_state_of(const std::string& sid) const {
    std::lock_guard lock(mutex_);
    if (sid.empty() || sid != client_id_ || progress_.empty()) return std::nullopt;
    const std::string prompt_id = progress_.begin()->value("prompt_id", std::string());
    std::string whole = progress_message(prompt_id, progress_);
    if (whole.size() <= (std::size_t{1} << 20)) return whole;
    json running = json::object();
    for (const auto& node : running_nodes_) running[node] = progress_[node];
    return progress_message(prompt_id, running);
  }

  // The node the prompt of client `sid` runs now, if one does.
  std::optional<std::string> running_node_of(const std::string& sid) const {
    std::lock_guard lock(mutex_);
    if (sid.empty() || sid != client_id_ || running_node_.empty()) return std::nullopt;
    return running_node_;
  }

  // ComfyUI's routing (execution.py, main.py at a125cd84): a prompt queued with a client_id
  // sends its events to that client; one without sends only progress and
  // execution_interrupted, to every client (status goes to all either way).
  void emit(const std::string& type, const json& data) override {
    std::string sid;
    {
      std::lock_guard lock(mutex_);
      sid = client_id_;
      if (type == "executing")
        running_node_ = data.contains("node") && data["node"].is_string()
                            ? data["node"].get<std::string>()
                            : std::string();
      if (type == "execution_start" || type == "execution_cached" ||
          type == "execution_success" || type == "execution_error" ||
          type == "execution_interrupted")
        messages_.push_back(json::array({type, data}));
      // The history keeps each node's UI (a cached node without one sends null: nothing kept).
      if (type == "executed" && data.contains("node") && data["node"].is_string() &&
          data.contains("output") && data["output"].is_object())
        outputs_[data["node"].get<std::string>()] = data["output"];
    }
    if (!sid.empty() || type == "progress" || type == "execution_interrupted")
      server_.send(sid, json{{"type", type}, {"data", data}}.dump(-1, ' ', false,
                                                                  json::error_handler_t::replace));
    // ComfyUI sends it to every client; here it goes where `progress` goes (the prompt's client,
    // or all for a prompt queued without one), so no client hears another's prompt. With no
    // client to hear it (a script polling /history), the message is not built: it grows with the
    // prompt's nodes at every event of a node. The states are kept either way, for a client
    // that connects later.
    if (auto state = progress_state(type, data, server_.ws_clients() > 0))
      server_.send(sid, std::move(*state));
  }

 private:
  // ComfyUI's progress_state (comfy_execution/progress.py at a125cd84): at each node's start,
  // progress and end, the state of every node of the prompt that is no longer pending,
  // {"prompt_id", "nodes": {id: {value, max, state, node_id, prompt_id, display_node_id,
  // real_node_id}}}. ComfyUI adds "parent_node_id": null for a node no subgraph expanded, which
  // the frontend's types (optional, never null) refuse: it is left out, as they have it. The
  // executor's events say when: executing (a start, which also ends the node before it),
  // progress, execution_cached and the prompt's end.
  // The whole state grows with the prompt's nodes at every event, and the frontend replaces its
  // own with each message: sent whole, a 10,000-node prompt had cost 50 s and disconnected its
  // client at 1,000 nodes. So it is sent whole while it holds at most `whole_state_nodes` (what
  // the frontend's minimap outlines, as with ComfyUI), and past that only the nodes the event
  // changed; the whole is kept for a client that connects later (progress_state_of).
  static constexpr std::size_t whole_state_nodes = 256;

  // Notes the event; the message when `wanted` and the event changed a state.
  std::optional<std::string> progress_state(const std::string& type, const json& data,
                                            bool wanted) {
    std::lock_guard lock(mutex_);
    const std::string prompt_id = data.value("prompt_id", json()).is_string()
                                      ? data["prompt_id"].get<std::string>()
                                      : std::string();
    json changed = json::object();
    const auto set = [&](const std::string& node, const char* state, double value, double max) {
      json& entry = progress_[node];
      entry = {{"value", value},         {"max", max},
               {"state", state},         {"node_id", node},
               {"prompt_id", prompt_id}, {"display_node_id", node},
               {"real_node_id", node}};
      if (std::string_view(state) == "running") running_nodes_.insert(node);
      else running_nodes_.erase(node);
      if (wanted) changed[node] = entry;
    };
    // Only the nodes running (one, or a few): not a walk of every node at every event.
    const auto finish_running = [&] {
      const auto running = std::move(running_nodes_);
      running_nodes_.clear();
      for (const auto& node : running) {
        const double max = progress_[node]["max"].is_number() ? progress_[node]["max"].get<double>()
                                                              : 1.0;
        set(node, "finished", max, max);
      }
    };
    if (type == "executing" && data.value("node", json()).is_string()) {
      finish_running();
      set(data["node"].get<std::string>(), "running", 0, 1);
    } else if (type == "progress" && data.value("node", json()).is_string() &&
               data.value("value", json()).is_number() && data.value("max", json()).is_number()) {
      set(data["node"].get<std::string>(), "running", data["value"].get<double>(),
          data["max"].get<double>());
    } else if (type == "execution_cached" && data.value("nodes", json()).is_array()) {
      for (const auto& node : data["nodes"])
        if (node.is_string()) set(node.get<std::string>(), "finished", 1, 1);
    } else if (type == "execution_success") {
      finish_running();
    } else {
      return std::nullopt;
    }
    if (!wanted || changed.empty()) return std::nullopt;
    return progress_message(prompt_id,
                            progress_.size() <= whole_state_nodes ? progress_ : changed);
  }

  static std::string progress_message(const std::string& prompt_id, const json& nodes) {
    return json{{"type", "progress_state"}, {"data", {{"prompt_id", prompt_id}, {"nodes", nodes}}}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
  }

  http_server& server_;
  mutable std::mutex mutex_;
  std::string client_id_;
  std::string running_node_;  // ComfyUI's last_node_id
  json messages_ = json::array();
  json outputs_ = json::object();
  json progress_ = json::object();  // node id -> its progress_state entry
  std::set<std::string> running_nodes_;  // those of progress_ whose state is running
};

}  // namespace orch::orchestrator
