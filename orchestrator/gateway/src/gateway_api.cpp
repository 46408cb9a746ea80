#include "orch/gateway/gateway_api.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>

#include <spdlog/spdlog.h>

#include "orch/executor/prompt.hpp"
#include "orch/fleet/prompt_needs.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::gateway {

using nlohmann::json;
using serve::http_reply;
using serve::http_request;
using serve::json_reply;

namespace {

http_reply empty_ok() {
  return {200, "application/json", ""};
}

http_reply bad_request(const std::string& message) {
  return json_reply({{"error", message}}, 400);
}

// ComfyUI's {"error": {type, message, details, extra_info}, "node_errors": {}}.
http_reply prompt_refused(const std::string& type, const std::string& message,
                          const std::string& details, json extra_info = json::object(),
                          unsigned status = 400) {
  return json_reply({{"error",
                      {{"type", type},
                       {"message", message},
                       {"details", details},
                       {"extra_info", std::move(extra_info)}}},
                     {"node_errors", json::object()}},
                    status);
}

std::optional<json> object_body(const http_request& req) {
  auto body = executor::parse_bounded_json(req.body.empty() ? std::string("{}") : req.body);
  if (!body || !body->is_object()) return std::nullopt;
  return std::move(*body);
}

}  // namespace

gateway_api::gateway_api(boost::asio::io_context& io, serve::http_server& server,
                         gateway_options options, std::unique_ptr<gateway_state> state,
                         const stored_state& stored)
    : io_(io),
      server_(server),
      options_(std::move(options)),
      state_(std::move(state)),
      client_id_("orch-gateway-" + (state_ != nullptr && !stored.gateway_id.empty()
                                        ? stored.gateway_id
                                        : std::to_string(::getpid()))),
      files_(options_.files),
      queue_(options_.history_size, options_.limits),
      fleet_fingerprint_(options_.fingerprint),
      check_timer_(io),
      web_(serve::frontend_files(options_.frontend_root), serve::user_data(options_.user_directory),
           options_.max_upload, serve::workflow_templates(serve::installed_workflow_templates())),
      own_files_(options_.frontend_root) {
  if (state_ != nullptr) {
    queue_.keep_in(state_.get());
    queue_.restore(stored);
    // The prompts its hosts ran for it before: their events go to their clients again once
    // their hosts answer (settle).
    for (const auto& [id, r] : queue_.running()) relay_[id] = r.prompt.client_id();
    if (queue_.remaining() > 0 || queue_.history_size() > 0)
      spdlog::info(
          "gateway: {} holds {} pending prompts, {} given to hosts before a restart, {} history "
          "entries",
          state_->file().string(), queue_.pending().size(), queue_.running().size(),
          queue_.history_size());
  }
  queue_.on_change([this](std::size_t) { server_.send("", status_message(false, "").dump()); });
}

gateway_api::~gateway_api() = default;

json gateway_api::status_message(bool with_sid, const std::string& sid) const {
  json data = {{"status", {{"exec_info", {{"queue_remaining", queue_.remaining()}}}}}};
  if (with_sid) data["sid"] = sid;
  return {{"type", "status"}, {"data", data}};
}

std::vector<std::string> gateway_api::greeting(const std::string& sid) {
  return on_io([&] {
    std::vector<std::string> out = {
        status_message(true, sid).dump(-1, ' ', false, json::error_handler_t::replace)};
    // As serve greets a client that connects again while its prompt runs: the node running and
    // the prompt's progress, as its host last sent them.
    for (auto it = live_.begin(); it != live_.end();) {
      const running_prompt* r = queue_.running(it->first);
      if (r == nullptr) {  // it ended without its `executing` for no node (its host lost)
        it = live_.erase(it);
        continue;
      }
      if (r->prompt.client_id() == sid) {
        if (!it->second.executing.empty()) out.push_back(it->second.executing);
        if (!it->second.progress.empty()) out.push_back(it->second.progress);
      }
      ++it;
    }
    return out;
  });
}

void gateway_api::add_routes(serve::route_table& table) {
  using enum serve::answered_on;
  using request = const http_request&;
  table.add({.method = "POST", .path = "/prompt", .answer = [this](request r) {
               return post_prompt(r);
             }});
  table.add(
      {.method = "GET", .path = "/prompt", .answer = [this](request) {
         return json_reply(
             {{"exec_info", {{"queue_remaining", on_io([&] { return queue_.remaining(); })}}}});
       }});
  table.add({.method = "GET", .path = "/queue", .answer = [this](request) {
               return json_reply(on_io([&] { return queue_.queue_json(); }));
             }});
  table.add(
      {.method = "POST", .path = "/queue", .answer = [this](request r) { return post_queue(r); }});
  table.add({.method = "GET", .path = "/history", .subpaths = true, .answer = [this](request r) {
               return history(r);
             }});
  table.add({.method = "POST", .path = "/history", .answer = [this](request r) {
               return post_history(r);
             }});
  table.add(
      {.method = "GET", .path = "/object_info", .subpaths = true, .answer = [this](request r) {
         return object_info(r);
       }});
  table.add(
      {.method = "POST", .path = "/interrupt", .where = io_thread, .answer = [this](request r) {
         return interrupt(r);
       }});
  table.add({.method = "GET", .path = "/orch/fleet", .answer = [this](request) {
               return json_reply(on_io([&] { return fleet_document(); }));
             }});
  add_live_routes(table);
  add_file_routes(table);
  add_frontend_routes(table);  // last: its fallback proxies what no route answers
}

http_reply gateway_api::post_prompt(const http_request& req) {
  std::vector<std::string> order;
  auto body = executor::parse_bounded_json(req.body, &order);
  if (!body) return prompt_refused("invalid_prompt", "Invalid prompt", body.err().message);
  if (!body->is_object())
    return prompt_refused("invalid_prompt", "Invalid prompt", "the request body is not an object");
  const auto prompt = body->find("prompt");
  if (prompt == body->end())
    return prompt_refused("no_prompt", "No prompt provided", "No prompt provided");
  if (!prompt->is_object())
    return prompt_refused("invalid_prompt", "Invalid prompt", "the prompt is not an object");
  fleet_prompt item;
  item.bytes = req.body.size();
  bool bad_id = false;
  auto client_prompt_id = serve::prompt_id_of(*body, bad_id);
  if (bad_id)
    return prompt_refused("invalid_prompt_id", "prompt_id must be a valid UUID",
                          "prompt_id must be a UUID string in canonical lowercase hyphenated "
                          "form; omit it to let the server generate one");
  item.prompt_id = client_prompt_id ? std::move(*client_prompt_id) : serve::uuid4();
  if (auto it = body->find("extra_data"); it != body->end() && it->is_object())
    item.extra_data = *it;
  for (const char* secret : {"auth_token_comfy_org", "api_key_comfy_org"})
    item.extra_data.erase(secret);  // never stored (serve's rule)
  if (auto it = body->find("client_id"); it != body->end() && it->is_string())
    item.extra_data["client_id"] = *it;
  auto needs = fleet::prompt_needs_of(*prompt, item.prompt_id);
  if (!needs.needs) return prompt_refused("invalid_prompt", "Invalid prompt", needs.error);
  item.document = *prompt;
  item.needs = std::move(*needs.needs);
  std::optional<double> number;
  if (auto it = body->find("number"); it != body->end()) {
    number = serve::number_of(*it);  // ComfyUI's float(): "3" is 3
    if (!number || !std::isfinite(*number)) return bad_request("number must be a finite number");
  }
  const bool front = serve::flag(*body, "front");
  return on_io([&]() -> http_reply {
    if (auto full = queue_.full_for(item.bytes))
      return prompt_refused("queue_full", "The queue is full", *full, json::object(), 503);
    // As serve refuses one it holds or ran: the gateway's hosts would refuse it.
    if (queue_.holds(item.prompt_id) || !queue_.history_of(item.prompt_id).empty())
      return prompt_refused("invalid_prompt_id",
                            "prompt_id is already queued, running or in the history",
                            "prompt " + item.prompt_id +
                                " waits, runs or ran; omit prompt_id to let the server make one");
    // Refused only once some host has said which classes it has: before, the prompt waits.
    std::vector<fleet::host_view> views;
    bool known = false;
    for (const auto& [_, h] : hosts_) {
      views.push_back(h.view);
      known = known || h.has_classes;
    }
    if (known) {
      const auto p =
          fleet::place(views, fleet_fingerprint_, item.needs, {}, now_tick(), options_.policy);
      if (p.kind == fleet::placement_kind::refused) {
        note(item.prompt_id, p);
        std::string first = p.missing_classes.empty() ? std::string() : p.missing_classes.front();
        std::string node_id;
        for (const auto& [id, node] : item.document.items())
          if (node.is_object() && node.value("class_type", std::string()) == first) node_id = id;
        return prompt_refused(
            "missing_node_type",
            "Node '" + first + "' not found. The custom node may not be installed.",
            "Node ID '#" + node_id + "'; " + p.reason,
            {{"node_id", node_id},
             {"class_type", first},
             {"node_title", first},
             {"orch_missing_classes", p.missing_classes},
             {"orch_placement", p.reason}});
      }
    }
    item.number = number ? *number : queue_.next_number(front);
    item.extra_data["create_time"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count();
    item.needs.queued_at = now_tick();
    json answer = {{"prompt_id", item.prompt_id},
                   {"number", serve::queue_number(item.number)},
                   {"node_errors", json::object()}};
    // Kept in the state before it is acknowledged: a restart after the answer loses nothing.
    if (auto put = queue_.put(std::move(item)); !put)
      return prompt_refused("queue_unavailable", "The prompt could not be queued",
                            put.err().message, json::object(), 503);
    schedule();
    return json_reply(answer);
  });
}

http_reply gateway_api::post_queue(const http_request& req) {
  auto body = object_body(req);
  if (!body) return bad_request("the body must be a JSON object");
  on_io([&] {
    if (serve::flag(*body, "clear")) queue_.clear_pending();
    if (body->contains("delete")) queue_.delete_pending(serve::ids_of(*body));
    return 0;
  });
  return empty_ok();
}

http_reply gateway_api::history(const http_request& req) {
  const std::string path = serve::route_path(req.path);
  if (path.size() > 9) {
    const std::string id = path.substr(9);
    if (!on_io([&] { return ending_.contains(id); }))
      return json_reply(on_io([&] { return queue_.history_of(id); }));
    // Its outcome is known and its entry on its way from its host: answered once it is here
    // (or the prompt is no longer running), from the waiting thread, within 10 s.
    http_reply later;
    later.later = [this, id] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < until &&
             on_io([&] { return ending_.contains(id) && queue_.running(id) != nullptr; }))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return json_reply(on_io([&] { return queue_.history_of(id); }));
    };
    return later;
  }
  std::optional<std::size_t> max_items;
  std::int64_t offset = -1;
  try {
    if (auto it = req.query.find("max_items"); it != req.query.end())
      max_items = static_cast<std::size_t>(std::stoull(it->second));
    if (auto it = req.query.find("offset"); it != req.query.end()) offset = std::stoll(it->second);
  } catch (const std::exception&) {
    return bad_request("max_items and offset must be integers");
  }
  const auto text = on_io([&] {
    return queue_.history(max_items, offset).dump(-1, ' ', false, json::error_handler_t::replace);
  });
  return {200, "application/json", text};
}

http_reply gateway_api::post_history(const http_request& req) {
  auto body = object_body(req);
  if (!body) return bad_request("the body must be a JSON object");
  on_io([&] {
    if (serve::flag(*body, "clear")) queue_.clear_history();
    if (body->contains("delete")) queue_.delete_history(serve::ids_of(*body));
    return 0;
  });
  return empty_ok();
}

http_reply gateway_api::object_info(const http_request& req) {
  // Every host of the fleet carries the same packs (its fingerprint): any host that is up
  // answers for all, on the waiting thread, never on the io or the API thread.
  const std::string target = req.target.empty() ? req.path : req.target;
  http_reply later;
  later.later = [this, target]() -> http_reply {
    // Where a host listens, copied on the io thread: its link may be replaced there (the host
    // restarted) while this waits, so this asks through a link of its own, with no stream.
    const auto where = on_io([&]() -> std::optional<std::pair<std::string, std::uint16_t>> {
      for (auto& [_, h] : hosts_)
        if (h.view.up && h.refusal.empty()) return std::pair(h.link->address(), h.link->port());
      return std::nullopt;
    });
    if (!where)
      return json_reply({{"error", "no host of the fleet is up to answer /object_info"}}, 503);
    host_link link(io_, where->first, where->second, options_.secret);
    auto answer = request_and_wait(link, "GET", target);
    if (!answer) return json_reply({{"error", answer.err().message}}, 502);
    return {answer->status, "application/json", std::move(answer->body)};
  };
  return later;
}

http_reply gateway_api::interrupt(const http_request& req) {
  // ComfyUI: with a prompt_id, only that prompt, while it runs; without, what runs (here,
  // every running prompt: the fleet runs several).
  std::optional<std::string> only;
  if (auto body = object_body(req))
    if (auto it = body->find("prompt_id"); it != body->end() && it->is_string())
      only = it->get<std::string>();
  on_io([&] {
    interrupt_running([&](const std::string& id) { return !only || *only == id; });
    return 0;
  });
  return empty_ok();
}

json gateway_api::placement_summary() const {
  json summary = fleet_document();
  for (auto& h : summary["hosts"]) h.erase("node_class_names");
  auto& decisions = summary["decisions"];
  if (decisions.size() > 10) decisions.erase(decisions.begin(), decisions.end() - 10);
  return summary;
}

void gateway_api::interrupt_running(const std::function<bool(const std::string&)>& which) {
  for (const auto& [id, r] : queue_.running()) {
    if (!which(id)) continue;
    const auto h = hosts_.find(r.host);
    // One interrupt on its way to a host at a time: a client that repeats /interrupt in a loop
    // asks the host once, and the gateway's requests to it stay bounded.
    if (h == hosts_.end() || !h->second.link || h->second.interrupting) continue;
    h->second.interrupting = true;
    h->second.link->request("POST", "/interrupt", json{{"prompt_id", id}}.dump(),
                            [this, name = r.host](result<host_answer>) {
                              if (stopped_) return;
                              if (const auto it = hosts_.find(name); it != hosts_.end())
                                it->second.interrupting = false;
                            });
  }
}

json gateway_api::fleet_document() const {
  json hosts = json::array();
  for (const auto& [name, h] : hosts_) {
    const auto* r = queue_.running_on(name);
    hosts.push_back({{"name", name},
                     {"url", h.url},
                     {"up", h.view.up},
                     {"listed", h.listed},
                     {"node_classes", h.view.node_classes.size()},
                     {"resident_models", h.view.resident_models},
                     {"free_device_bytes", h.view.free_device_bytes},
                     {"fingerprint", h.view.fingerprint},
                     {"refused", h.refusal.empty() ? json() : json(h.refusal)},
                     {"error", h.last_error.empty() ? json() : json(h.last_error)},
                     {"node_class_names", h.view.node_classes},
                     {"last_used", h.view.last_used},
                     {"pid", h.pid != 0 ? json(h.pid) : json()},
                     {"running", r != nullptr ? json(r->prompt.prompt_id) : json()},
                     {"running_node_started", r != nullptr && r->node_started},
                     {"inputs_sent", h.inputs_sent}});
  }
  json decisions = json::array();
  for (const auto& d : decisions_)
    decisions.push_back({{"prompt_id", d.prompt_id},
                         {"decision", fleet::to_string(d.placement.kind)},
                         {"host", d.placement.host},
                         {"loads", d.placement.loads},
                         {"missing_classes", d.placement.missing_classes},
                         {"reason", d.placement.reason},
                         {"tick", d.tick}});
  return {{"hosts", hosts},
          {"fingerprint", fleet_fingerprint_},
          {"decisions", decisions},
          {"queue_remaining", queue_.remaining()},
          {"client_id", client_id()}};
}

}  // namespace orch::gateway
