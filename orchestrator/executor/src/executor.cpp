#include "orch/executor/executor.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <spdlog/spdlog.h>

#include "hidden_values.hpp"
#include "orch/executor/execution_messages.hpp"
#include "orch/fleet/prompt_needs.hpp"
#include "orch/runtime/checked_call.hpp"
#include "orch/support/json_fields.hpp"

#include "orch/executor/list_mapping.hpp"
#include "orch/executor/prompt_validation.hpp"

namespace orch::executor {
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

// ComfyUI's merge of the UI dicts of a node's calls: per key of the first, every call's items
// in order. Null when no call returned one.
json merge_ui(std::vector<json>& uis) {
  if (uis.empty()) return nullptr;
  if (uis.size() == 1) return std::move(uis[0]);
  json merged = json::object();
  for (const auto& [key, first] : uis[0].items()) {
    json items = json::array();
    for (auto& ui : uis) {
      auto it = ui.find(key);
      if (it == ui.end()) continue;
      if (it->is_array()) {
        for (auto& item : *it) items.push_back(std::move(item));
      } else {
        items.push_back(std::move(*it));
      }
    }
    merged[key] = std::move(items);
  }
  return merged;
}

// The ids of the nodes whose outputs this prompt has (ComfyUI's current_outputs).
json executed_ids(const prompt_outcome& outcome) {
  json ids = json::array();
  for (const auto& [id, node] : outcome.nodes) ids.push_back(id);
  return ids;
}

}  // namespace

executor::~executor() {
  release_outputs();
  release(cache_.clear());
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

void executor::release(const std::vector<ipc::buffer_descriptor>& leases) noexcept {
  if (leases.empty() || host_.stopped()) return;
  try {
    host_.on_io_thread([&] {
      for (const auto& d : leases) (void)host_.memory().leases().release(d, runtime::host_slot);
    });
  } catch (...) {
    spdlog::error("executor: releasing {} output block(s) failed", leases.size());
  }
}

void executor::release_outputs() noexcept {
  release(owned_);
  owned_.clear();
  readable_.clear();
  handed_over_.clear();
}

std::optional<std::size_t> executor::clear_cache() {
  return host_.on_io_thread([this]() -> std::optional<std::size_t> {
    clear_cache_requested_ = true;
    if (running_) return std::nullopt;  // ComfyUI frees between prompts too: at its end
    return clear_cache_if_requested();
  });
}

std::size_t executor::clear_cache_if_requested() {
  if (!clear_cache_requested_) return 0;
  clear_cache_requested_ = false;
  const std::size_t n = cache_.size();
  release(cache_.clear());
  readable_.clear();
  return n;
}

std::size_t executor::cached_nodes() {
  return host_.on_io_thread([this] { return cache_.size(); });
}

void executor::interrupt() {
  interrupted_.store(true);
  const std::uint64_t epoch = epoch_.load();
  host_.on_io_thread([&] { host_.workers().interrupt(epoch); });
}

result<json> executor::call_node(const std::string& env, const json& body) {
  // Only what a node of this prompt produced reaches a worker as a tensor.
  auto c = runtime::checked_call(host_, env, body, readable_);
  owned_.insert(owned_.end(), c.handed.begin(), c.handed.end());
  return std::move(c.response);
}

boost::asio::awaitable<result<json>> executor::call_node_async(const std::string& env,
                                                               const json& body) {
  auto c = co_await runtime::async_checked_call(host_, env, body, readable_);
  owned_.insert(owned_.end(), c.handed.begin(), c.handed.end());
  co_return std::move(c.response);
}

boost::asio::awaitable<result<json>> executor::call_with_retry(
    const std::string& env, const json& body, std::vector<ipc::buffer_descriptor>& handed) {
  auto c = co_await runtime::async_call_with_retry(host_, env, body, readable_);
  handed.insert(handed.end(), c.handed.begin(), c.handed.end());
  co_return std::move(c.response);
}

void executor::prune_cache() {
  clear_cache_if_requested();
  worker_losses_.clear();
  if (cache_.policy() == manifests::cache_policy::none) return;
  // A worker lost since an entry was kept took the entry's objects (handles) with it. What this
  // prompt keeps is stamped with these counts: a loss during the prompt drops it next time.
  for (const auto& w : host_.workers().workers()) worker_losses_[w.env] = w.losses;
  release(cache_.drop([&](const cache_entry& e) {
    const auto it = worker_losses_.find(e.env);
    return it == worker_losses_.end() || it->second != e.worker_losses;
  }));
}

boost::asio::awaitable<std::map<std::string, cache_key>> executor::cache_keys(
    const prompt& p, const std::vector<std::string>& order) {
  std::map<std::string, cache_key> keys;
  if (cache_.policy() == manifests::cache_policy::none) co_return keys;
  const auto& catalogue = host_.catalogue();
  for (const auto& id : order) {
    const prompt_node& node = p.nodes.at(id);
    const runtime::node_class* cls = catalogue.find(node.class_type);
    if (cls == nullptr) continue;  // run() reports it
    json literals = json::object();
    std::map<std::string, std::pair<const cache_key*, std::int64_t>> links;
    for (const auto& [name, value] : node.inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) {
        const auto it = keys.find(link->node_id);
        links[name] = {it == keys.end() ? nullptr : &it->second, link->slot};
      } else {
        literals[name] = std::get<json>(value);
      }
    }
    // ComfyUI keys by node id too for a NOT_IDEMPOTENT class and one that reads its UNIQUE_ID.
    const bool by_id = cls->not_idempotent || cls->hidden.count("UNIQUE_ID") > 0;
    const std::optional<json> changed = co_await change_key(p, node, *cls);
    keys[id] = cache_.key(cls->class_type, changed, by_id ? id : std::string(), literals, links);
  }
  co_return keys;
}

boost::asio::awaitable<std::optional<json>> executor::run_node(
    const prompt& p, const std::string& id, const runtime::node_class& cls,
    const std::map<std::string, json>& lists, std::uint64_t epoch, node_outcome& n,
    std::vector<ipc::buffer_descriptor>& handed) {
  auto calls = call_inputs(cls, lists);
  if (!calls)
    co_return json{{"exception_type", calls.err().code},
                   {"exception_message", calls.err().message}};
  // The same for every call of the node: built (and checked) once.
  const json hidden = hidden_values(p, cls, id);
  std::vector<json> call_outputs;
  std::vector<json> uis;
  for (json& inputs : *calls) {
    json body{{"node", id},
              {"class_type", cls.class_type},
              {"epoch", epoch},
              {"inputs", std::move(inputs)}};
    if (!hidden.empty()) body["hidden"] = hidden;
    // The model files a loader names (ComfyUI's folders, orch/fleet/prompt_needs.hpp): the
    // models its call creates are labelled with them, as a fleet's gateway names a prompt's.
    const std::vector<std::string> asked = fleet::model_names_of(cls.class_type, body["inputs"]);
    std::set<std::string> models_before;
    if (!asked.empty())
      for (const auto& m : host_.stand_ins().entries())
        if (m.env == cls.env) models_before.insert(m.id);
    if (auto failed = co_await hand_over_objects(body["inputs"], cls, id, epoch))
      co_return failed;
    const auto call_start = std::chrono::steady_clock::now();
    result<json> r = co_await call_with_retry(cls.env, body, handed);
    if (!asked.empty() && r) host_.label_new_stand_ins(cls.env, models_before, asked);
    n.call_us +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - call_start)
            .count();
    if (!r)
      co_return json{{"exception_type", r.err().code}, {"exception_message", r.err().message}};
    if ((*r).value("status", "") != "ok") {
      const json& e = (*r)["error"];  // an object: ipc::check_call_response
      const std::string type = text_field(e, "type");
      co_return json{{"exception_type", type.empty() ? ipc::node_error_type::node_error : type},
                     {"exception_message", text_field(e, "message")},
                     {"traceback", traceback_lines(e)}};
    }
    if (r->contains("expand")) {
      // ComfyUI runs the subgraph in the node's place; this executor has no dynamic prompt.
      co_return json{{"exception_type", "NotImplementedError"},
                     {"exception_message",
                      "node " + id + " (" + cls.class_type +
                          ") returned a subgraph expansion ('expand'): `comfy-orch run` and "
                          "`serve` do not carry one out; run the prompt in ComfyUI "
                          "(comfy-orch launch), which does"}};
    }
    call_outputs.push_back(std::move((*r)["outputs"]));
    n.inputs_seen = (*r).value("inputs_seen", json::object());
    if (auto ui = r->find("ui"); ui != r->end() && ui->is_object()) uis.push_back(std::move(*ui));
  }
  n.ui = merge_ui(uis);
  auto merged = merge_call_outputs(cls, call_outputs);
  if (!merged) {
    co_return json{{"exception_type", merged.err().code},
                   {"exception_message", merged.err().message}};
  }
  n.output_lists = std::move(*merged);
  n.outputs = call_outputs.size() == 1 ? std::move(call_outputs[0]) : n.output_lists;
  co_return std::nullopt;
}

prompt_outcome executor::run(const prompt& p, const std::vector<std::string>& outputs,
                             const std::string& prompt_id) {
  if (host_.on_the_io_thread())
    throw std::logic_error("executor::run waits for the io thread: use run_async on it");
  return boost::asio::co_spawn(host_.io(), run_async(p, outputs, prompt_id),
                               boost::asio::use_future)
      .get();
}

boost::asio::awaitable<prompt_outcome> executor::run_async(
    const prompt& p, const std::vector<std::string>& outputs, const std::string& prompt_id) {
  // Set for the prompt's whole run, on every way out of it: a /free meanwhile waits for its end.
  struct running_flag {
    explicit running_flag(bool& f) : flag(f) { flag = true; }
    running_flag(const running_flag&) = delete;
    running_flag& operator=(const running_flag&) = delete;
    ~running_flag() { flag = false; }
    bool& flag;
  };
  if (running_) throw std::logic_error("executor: a prompt is running already");
  prompt_outcome outcome;
  {
    const running_flag running(running_);
    outcome = co_await run_prompt(p, outputs, prompt_id);
  }
  // A /free that came while the prompt ran: between prompts, as ComfyUI.
  clear_cache_if_requested();
  co_return outcome;
}

boost::asio::awaitable<prompt_outcome> executor::run_prompt(
    const prompt& p, const std::vector<std::string>& outputs, const std::string& prompt_id) {
  release_outputs();
  prompt_outcome outcome;
  outcome.prompt_id = prompt_id;
  outcome.epoch = epoch_.fetch_add(1) + 1;
  const auto& catalogue = host_.catalogue();
  progress_prompt_id_ = prompt_id;
  if (!progress_hooked_) {
    progress_hooked_ = true;
    host_.workers().on_progress = [this](const std::string&, const json& pr) {
      events_.emit("progress", {{"value", pr["value"]},
                                {"max", pr["max"]},
                                {"prompt_id", progress_prompt_id_},
                                {"node", pr["node"]}});
    };
  }
  events_.emit("execution_start", {{"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  const prompt_end end(events_, prompt_id);
  const std::vector<std::string> order = execution_order(p, outputs);
  // As ComfyUI: every node is keyed, and what the cache no longer keeps dropped, before any
  // node runs; then the cached nodes are announced.
  prune_cache();
  cache_.begin_prompt();
  const std::map<std::string, cache_key> keys = co_await cache_keys(p, order);
  release(cache_.end_keys());
  // In the prompt's own order, as ComfyUI lists them (by id for a prompt built without one).
  json cached_ids = json::array();
  for (const auto& id : p.order.size() == p.nodes.size() ? p.order : order) {
    if (auto it = keys.find(id); it != keys.end() && it->second.hit) cached_ids.push_back(id);
  }
  events_.emit("execution_cached",
               {{"nodes", cached_ids}, {"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  json executed = json::array();
  for (const auto& id : order) {
    const prompt_node& node = p.nodes.at(id);
    const runtime::node_class* cls = catalogue.find(node.class_type);
    if (cls == nullptr) {  // validation prevents this; kept as a typed error, never a crash
      outcome.error = json{{"prompt_id", prompt_id}, {"node_id", id},
                           {"node_type", node.class_type}, {"executed", executed},
                           {"exception_type", "missing_node_type"},
                           {"exception_message", node.class_type + " is provided by no pack"}};
      events_.emit("execution_error",
                   error_message(*outcome.error, json::object(), executed_ids(outcome)));
      co_return outcome;
    }
    const auto key = keys.find(id);
    if (const cache_entry* hit = key == keys.end() ? nullptr : cache_.find(key->second)) {
      readable_.insert(readable_.end(), hit->leases.begin(), hit->leases.end());
      node_outcome n = hit->outcome;
      n.cached = true;
      n.call_us = 0;
      // ComfyUI sends a cached output node's UI again (null when it has none); the nodes
      // below an output are silent.
      if (std::find(outputs.begin(), outputs.end(), id) != outputs.end()) {
        events_.emit("executed", {{"node", id}, {"display_node", id}, {"output", n.ui},
                                  {"prompt_id", prompt_id}});
      }
      outcome.nodes[id] = std::move(n);
      continue;
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
      co_return outcome;
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
    node_outcome n;
    n.class_type = node.class_type;
    n.env = cls->env;
    if (key == keys.end()) {  // no cache: IS_CHANGED just before the node, as before
      const std::optional<json> changed = co_await change_key(p, node, *cls);
      n.change_key = changed.value_or(json());
    }
    std::vector<ipc::buffer_descriptor> handed;
    std::optional<json> error_data =
        co_await run_node(p, id, *cls, lists, outcome.epoch, n, handed);
    readable_.insert(readable_.end(), handed.begin(), handed.end());
    if (error_data) {
      owned_.insert(owned_.end(), handed.begin(), handed.end());
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
      co_return outcome;
    }
    // ComfyUI's executed: only a node that returned UI, and with that UI.
    if (n.ui.is_object() && !n.ui.empty()) {
      events_.emit("executed", {{"node", id}, {"display_node", id}, {"output", n.ui},
                                {"prompt_id", prompt_id}});
    }
    if (key != keys.end()) {
      cache_entry entry;
      entry.env = cls->env;
      entry.worker_losses = worker_losses_[cls->env];
      entry.outcome = n;
      entry.leases = handed;
      if (!cache_.store(key->second, std::move(entry))) {
        owned_.insert(owned_.end(), handed.begin(), handed.end());
      }
    } else {
      owned_.insert(owned_.end(), handed.begin(), handed.end());
    }
    outcome.nodes[id] = std::move(n);
    executed.push_back(id);
  }
  outcome.ok = true;
  events_.emit("execution_success", {{"prompt_id", prompt_id}, {"timestamp", now_ms()}});
  co_return outcome;
}

}  // namespace orch::executor
