// serve_events: comfy_api's event sink (serve_api.hpp): where the executor's events of a prompt
// go (the WebSocket clients, as ComfyUI routes them) and what the prompt's history entry keeps.
#pragma once

#include <mutex>
#include <optional>
#include <string>
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
  }
  // The history's outputs and status of the prompt that just ended.
  std::pair<json, json> end(bool ok) {
    std::lock_guard lock(mutex_);
    json status = {{"status_str", ok ? "success" : "error"},
                   {"completed", ok},
                   {"messages", messages_}};
    return {outputs_, status};
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
    if (sid.empty() && type != "progress" && type != "execution_interrupted") return;
    server_.send(sid, json{{"type", type}, {"data", data}}.dump(-1, ' ', false,
                                                                json::error_handler_t::replace));
  }

 private:
  http_server& server_;
  mutable std::mutex mutex_;
  std::string client_id_;
  std::string running_node_;  // ComfyUI's last_node_id
  json messages_ = json::array();
  json outputs_ = json::object();
};

}  // namespace orch::orchestrator
