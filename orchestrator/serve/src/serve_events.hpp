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
#include <spdlog/spdlog.h>

#include "orch/runtime/ui_messages.hpp"
#include "orch/serve/image_codec.hpp"
#include "orch/serve/serve_api.hpp"

namespace orch::serve {

// What the executor says goes to the client that queued the prompt (see emit), and the status
// messages and UI outputs into the prompt's history entry.
class comfy_api::events final : public executor::event_sink {
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

  // A worker's message for the clients (ui_messages.hpp), as ComfyUI's server sends it:
  // {"type": event, "data"} as text, a binary event as its number (4 bytes, big-endian) and its
  // bytes, to `sid` or, null, to every client. A node's preview is its progress, then the image
  // encoded as ComfyUI encodes it (JPEG quality 95, or PNG), to the prompt's client.
  void ui_message(const json& m) {
    if (m.contains("preview")) return preview(m);
    const std::string sid = m["sid"].is_string() ? m["sid"].get<std::string>() : std::string();
    if (m["event"].is_number_unsigned())
      return server_.send(sid, binary_event(m["event"].get<std::uint32_t>(),
                                            m["data"].get_binary()), true);
    server_.send(sid, json{{"type", m["event"]}, {"data", m["data"]}}.dump(
                          -1, ' ', false, json::error_handler_t::replace));
  }

  // ComfyUI's routing (execution.py, main.py at a125cd84): a prompt queued with a client_id
  // sends its events to that client; one without sends only progress and
  // execution_interrupted, to every client (status goes to all either way).
  void emit(const std::string& type, const json& data) override {
    std::string sid;
    {
      std::lock_guard lock(mutex_);
      sid = client_id_;
      if (type == "execution_start" && data.value("prompt_id", json()).is_string())
        prompt_id_ = data["prompt_id"].get<std::string>();
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
  static std::string binary_event(std::uint32_t event, const std::vector<std::uint8_t>& bytes) {
    std::string frame;
    frame.reserve(4 + bytes.size());
    for (int shift : {24, 16, 8, 0}) frame += static_cast<char>((event >> shift) & 0xff);
    frame.append(bytes.begin(), bytes.end());
    return frame;
  }

  void preview(const json& m) {
    std::string prompt_id, sid;
    {
      std::lock_guard lock(mutex_);
      prompt_id = prompt_id_;
      sid = client_id_;
    }
    const std::string node = m["node"].get<std::string>();
    emit("progress", {{"value", m["value"]}, {"max", m["max"]}, {"prompt_id", prompt_id},
                      {"node", node}});
    if (server_.ws_clients() == 0) return;  // nobody to see it: not encoded
    const json& p = m["preview"];
    const bool png = p["format"] == "PNG";
    const auto& pixels = p["pixels"].get_binary();
    const auto w = p["width"].get<std::uint32_t>(), h = p["height"].get<std::uint32_t>();
    auto image = png ? encode_png(pixels.data(), w, h, 3, 1) : encode_jpeg(pixels.data(), w, h, 95);
    if (!image) {
      spdlog::warn("serve: a preview of node {} was not sent: {}", node, image.err().message);
      return;
    }
    std::vector<std::uint8_t> legacy = {0, 0, 0, static_cast<std::uint8_t>(png ? 2 : 1)};
    legacy.insert(legacy.end(), image->begin(), image->end());
    const std::string metadata = json{{"node_id", node},         {"prompt_id", prompt_id},
                                      {"display_node_id", node}, {"parent_node_id", nullptr},
                                      {"real_node_id", node},
                                      {"image_type", png ? "image/png" : "image/jpeg"}}
                                     .dump();
    std::vector<std::uint8_t> with_metadata;
    for (int shift : {24, 16, 8, 0})
      with_metadata.push_back(static_cast<std::uint8_t>((metadata.size() >> shift) & 0xff));
    with_metadata.insert(with_metadata.end(), metadata.begin(), metadata.end());
    with_metadata.insert(with_metadata.end(), image->begin(), image->end());
    server_.send_preview(sid, binary_event(runtime::preview_image_event, legacy),
                         binary_event(runtime::preview_image_with_metadata_event, with_metadata));
  }

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
  std::string prompt_id_;  // the running (or last) prompt's
  std::string running_node_;  // ComfyUI's last_node_id
  json messages_ = json::array();
  json outputs_ = json::object();
  json progress_ = json::object();  // node id -> its progress_state entry
  std::set<std::string> running_nodes_;  // those of progress_ whose state is running
};

}  // namespace orch::serve
