#include "orch/serve/serve_api.hpp"

#include "orch/serve/worker_routes.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "orch/executor/execution_messages.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/executor/unstarted_envs.hpp"
#include "orch/runtime/memory_table.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/support/untrusted_text.hpp"
#include "serve_events.hpp"
#include "serve_json_streams.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::serve {

using nlohmann::json;

namespace {

http_reply empty_ok() { return {200, "application/json", ""}; }

// ComfyUI's {"error": {type, message, details, extra_info}, "node_errors": {}} for a body that is
// not a prompt.
http_reply prompt_refused(const std::string& type, const std::string& message,
                          const std::string& details, unsigned status = 400) {
  return json_reply({{"error",
                      {{"type", type},
                       {"message", message},
                       {"details", details},
                       {"extra_info", json::object()}}},
                     {"node_errors", json::object()}},
                    status);
}

http_reply bad_request(const std::string& message) {
  return json_reply({{"error", message}}, 400);
}

}  // namespace

comfy_api::comfy_api(runtime::host_runtime& host, http_server& server, std::size_t history_size,
                     server_identity identity, queue_limits limits, frontend_routes web)
    : host_(host),
      server_(server),
      queue_(history_size, limits),
      events_(std::make_unique<events>(server)),
      executor_(std::make_unique<executor::executor>(host, *events_, host.deployment().server.cache,
                                                     host.deployment().server.lru_prompts)),
      validator_(std::make_unique<executor::executor>(host, validation_events_)),
      identity_(std::move(identity)),
      files_(file_directories_of(host.deployment())),
      web_(std::move(web)) {
  queue_.on_change([this](std::size_t) { server_.send("", status_message(false, "").dump()); });
  // A pack's messages from its worker, whenever they come (a node's, a route handler's).
  host_.on_io_thread([this] {
    host_.workers().on_ui_message = [this](const std::string&, const nlohmann::json& m) {
      events_->ui_message(m);
    };
  });
}

comfy_api::~comfy_api() {
  stop(true);
  // A start_next posted before the HTTP server stopped must not run after this is gone: the io
  // thread runs what was posted in order, so one more turn of it runs them all.
  if (!host_.stopped()) host_.on_io_thread([this] { host_.workers().on_ui_message = nullptr; });
}

void comfy_api::stop(bool interrupt_running, std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  // In this order: no prompt is taken after the stop, and one taken just before it is
  // interrupted by run_item itself (its interrupt flag is cleared when it starts).
  interrupt_on_stop_ = interrupt_running;
  stopping_ = true;
  queue_.stop();
  queue_.clear_pending();
  if (interrupt_running && queue_.running_id()) executor_->interrupt();
  {
    std::unique_lock lock(busy_mutex_);
    if (interrupt_running && !idle_.wait_for(lock, grace, [&] { return !busy_; })) {
      lock.unlock();
      host_.kill_busy_workers(std::to_string(grace.count()) + " ms after the stop's interrupt");
      lock.lock();
    }
    idle_.wait(lock, [&] { return !busy_; });
  }
  queue_.on_change({});
}

void comfy_api::start_next() {
  {
    // Busy before the queue is asked: stop() then either sees it, or the queue stopped first
    // and nothing is taken.
    std::lock_guard lock(busy_mutex_);
    if (busy_) return;  // the running prompt starts the next as it ends
    busy_ = true;
  }
  std::optional<queued_prompt> item;
  if (!stopping_) item = queue_.try_take();
  if (!item) {
    {
      std::lock_guard lock(busy_mutex_);
      busy_ = false;
    }
    idle_.notify_all();
    return;
  }
  boost::asio::co_spawn(host_.io(), run_item(std::move(*item)), [this](std::exception_ptr e) {
    if (e) spdlog::error("serve: a prompt ended with an exception that is not std::exception");
    {
      std::lock_guard lock(busy_mutex_);
      busy_ = false;
    }
    idle_.notify_all();
    start_next();
  });
}

boost::asio::awaitable<void> comfy_api::run_item(queued_prompt item) {
  executor_->clear_interrupt();
  if (stopping_ && interrupt_on_stop_) executor_->interrupt();
  events_->begin(item.client_id());
  bool ok = false;
  try {
    const executor::prompt_outcome outcome =
        co_await executor_->run_async(item.parsed, item.outputs, item.prompt_id);
    ok = outcome.ok;
  } catch (const std::exception& e) {  // a bug or an allocation failure: this prompt fails
    spdlog::error("serve: prompt {} failed in the executor: {}", item.prompt_id, e.what());
  }
  auto [outputs, status] = events_->end(ok);
  queue_.finish(outputs, status);
}

json comfy_api::status_message(bool with_sid, const std::string& sid) const {
  json data = {{"status", {{"exec_info", {{"queue_remaining", queue_.remaining()}}}}}};
  if (with_sid) data["sid"] = sid;
  return {{"type", "status"}, {"data", data}};
}

std::vector<std::string> comfy_api::greeting(const std::string& sid) const {
  // The sid is the client's clientId: any bytes.
  std::vector<std::string> out = {
      status_message(true, sid).dump(-1, ' ', false, json::error_handler_t::replace)};
  if (auto node = events_->running_node_of(sid))
    out.push_back(json{{"type", "executing"}, {"data", {{"node", *node}}}}.dump(
        -1, ' ', false, json::error_handler_t::replace));
  if (auto state = events_->progress_state_of(sid)) out.push_back(std::move(*state));
  return out;
}

void comfy_api::add_routes(route_table& table) {
  using enum answered_on;
  using request = const http_request&;
  // The io thread answers what needs no wait: POST /interrupt and GET /prompt, so an interrupt is
  // never queued behind a request that waits for the very node it should stop, and POST /prompt
  // (a prompt a worker must validate is answered `later`, on the waiting thread).
  table.add({.method = "POST", .path = "/prompt", .where = io_thread, .answer = [this](request r) {
               return post_prompt(r);
             }});
  table.add({.method = "GET", .path = "/prompt", .where = io_thread, .answer = [this](request) {
               return json_reply({{"exec_info", {{"queue_remaining", queue_.remaining()}}}});
             }});
  table.add({.method = "GET", .path = "/queue", .answer = [this](request) {
               return streamed_queue(queue_.texts());
             }});
  table.add({.method = "POST", .path = "/queue", .trims = true, .answer = [this](request r) {
               return post_queue(r);
             }});
  table.add({.method = "GET", .path = "/history", .subpaths = true, .answer = [this](request r) {
               return history(route_path(r.path), r);
             }});
  table.add({.method = "POST", .path = "/history", .trims = true, .answer = [this](request r) {
               return post_history(r);
             }});
  table.add(
      {.method = "GET", .path = "/object_info", .subpaths = true, .answer = [this](request r) {
         return object_info(route_path(r.path));
       }});
  table.add(
      {.method = "POST", .path = "/interrupt", .where = io_thread, .answer = [this](request r) {
         return interrupt(r);
       }});
  table.add({.method = "POST", .path = "/free", .answer = [this](request r) { return free(r); }});
  table.add({.method = "GET", .path = "/system_stats", .answer = [this](request) {
               return system_stats();
             }});
  table.add(
      {.method = "GET", .path = "/view", .answer = [this](request r) { return files_.view(r); }});
  table.add(
      {.method = "POST", .path = "/upload/image", .upload = true, .answer = [this](request r) {
         return files_.upload_image(r);
       }});
  table.add({.method = "POST", .path = "/upload/mask", .upload = true, .answer = [this](request r) {
               return files_.upload_mask(r);
             }});
  table.add_fallback([this](request r) { return jobs(r); });
  // A pack's aiohttp route, after ComfyUI's own and before its web root, as main.py adds them.
  table.add_fallback([this](request r) -> std::optional<http_reply> {
    auto forward = worker_route_for(host_, r);
    if (!forward) return std::nullopt;
    http_reply reply;
    reply.forward = std::move(forward);
    return reply;
  });
  table.add_fallback([this](request r) { return web_.handle(r); });
}

http_reply comfy_api::post_prompt(const http_request& req) {
  // Before anything is parsed: a full queue costs a client nothing but this answer.
  if (auto full = queue_.full_for(req.body.size()))
    return prompt_refused("queue_full", "The queue is full", *full, 503);
  std::vector<std::string> order;
  auto body = executor::parse_bounded_json(req.body, &order);
  if (!body) return prompt_refused("invalid_prompt", "Invalid prompt", body.err().message);
  if (!body->is_object())
    return prompt_refused("invalid_prompt", "Invalid prompt", "the request body is not an object");
  if (!body->contains("prompt"))
    return prompt_refused("no_prompt", "No prompt provided", "No prompt provided");
  auto parsed = executor::prompt_from_document(*body, order);
  if (!parsed) return json_reply(executor::invalid_prompt_report(parsed.err()).to_json(), 400);

  queued_prompt item;
  item.bytes = req.body.size();
  if (auto it = body->find("number"); it != body->end()) {
    const auto n = number_of(*it);
    if (!n || !std::isfinite(*n)) return bad_request("number must be a finite number");
    item.number = *n;
  } else {
    item.number = queue_.next_number(flag(*body, "front"));
  }
  bool bad_id = false;
  auto id = prompt_id_of(*body, bad_id);
  if (bad_id)
    return prompt_refused("invalid_prompt_id", "prompt_id must be a valid UUID",
                          "prompt_id must be a UUID string in canonical lowercase hyphenated "
                          "form; omit it to let the server generate one");
  item.prompt_id = id ? std::move(*id) : uuid4();
  if (auto it = body->find("extra_data"); it != body->end() && it->is_object())
    item.extra_data = *it;
  // ComfyUI's SENSITIVE_EXTRA_DATA_KEYS: comfy.org credentials are never stored, so /queue and
  // /history never show them (no node of a worker is handed them: docs/security.md).
  for (const char* secret : {"auth_token_comfy_org", "api_key_comfy_org"})
    item.extra_data.erase(secret);
  if (auto it = body->find("client_id"); it != body->end() && it->is_string())
    item.extra_data["client_id"] = *it;
  if (!req.usage_source.empty() && !item.extra_data.contains("comfy_usage_source"))
    item.extra_data["comfy_usage_source"] = printable(req.usage_source.substr(0, 256));
  item.document = std::move((*body)["prompt"]);
  item.parsed = std::move(*parsed);

  // A node's VALIDATE_INPUTS runs in its worker, which may be inside a long node: that wait
  // happens on the server's waiting thread, never on the io or the API thread (S17).
  bool worker_validates = false;
  for (const auto& entry : item.parsed.nodes) {
    const runtime::node_class* cls = host_.catalogue().find(entry.second.class_type);
    worker_validates = worker_validates || (cls != nullptr && cls->validate_inputs.present);
  }
  if (!worker_validates) return queue_validated(std::move(item));
  auto waiting = std::make_shared<queued_prompt>(std::move(item));
  http_reply later;
  later.later = [this, waiting] { return queue_validated(std::move(*waiting)); };
  return later;
}

http_reply comfy_api::queue_validated(queued_prompt item) {
  const auto report =
      executor::validate_prompt(item.parsed, host_.catalogue(), validator_->worker_validation());
  if (!report.ok()) {
    // A class no running worker provides, while a worker is not running: the worker's failure.
    const auto infos = host_.on_io_thread([&] { return host_.workers().workers(); });
    if (const auto failed = executor::missing_classes_of_unstarted_envs(report, infos))
      return json_reply(to_json(*failed, report), 400);
    return json_reply(report.to_json(), 400);
  }

  for (const auto& line : executor::ignored_outputs_log(report))
    spdlog::error("{}", printable(line));
  item.outputs = report.outputs;
  json answer = {{"prompt_id", item.prompt_id},
                 {"number", queue_number(item.number)},
                 {"node_errors", report.to_json()["node_errors"]}};
  // ComfyUI's: milliseconds since the epoch, when the prompt was queued (the jobs API's).
  item.extra_data["create_time"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
  // A prompt_id this host holds or ran is refused, not run again: a gateway whose POST went
  // unanswered sends it again (docs/fleet.md, "A prompt in doubt"), and the first may have come.
  const std::string id = item.prompt_id;
  if (!queue_.put_new(std::move(item)))
    return prompt_refused(
        "prompt_id_known", "prompt_id is already queued, running or in the history",
        "prompt " + id + " is known here; omit prompt_id to let the server make one");
  // After this handler's answer is on its way: the prompt's events follow it.
  boost::asio::post(host_.io(), [this] { start_next(); });
  return json_reply(answer);
}

http_reply comfy_api::post_queue(const http_request& req) {
  auto body = executor::parse_bounded_json(req.body);
  if (!body || !body->is_object()) return bad_request("the body must be a JSON object");
  if (flag(*body, "clear")) queue_.clear_pending();
  if (body->contains("delete")) queue_.delete_pending(ids_of(*body));
  return empty_ok();
}

http_reply comfy_api::history(const std::string& path, const http_request& req) {
  if (path.size() > 9) return json_reply(queue_.history_of(path.substr(9)));
  std::optional<std::size_t> max_items;
  std::int64_t offset = -1;
  try {
    if (auto it = req.query.find("max_items"); it != req.query.end())
      max_items = static_cast<std::size_t>(std::stoull(it->second));
    if (auto it = req.query.find("offset"); it != req.query.end()) offset = std::stoll(it->second);
  } catch (const std::exception&) {
    return bad_request("max_items and offset must be integers");
  }
  return streamed_history(queue_.history_items(max_items, offset));
}

http_reply comfy_api::post_history(const http_request& req) {
  auto body = executor::parse_bounded_json(req.body);
  if (!body || !body->is_object()) return bad_request("the body must be a JSON object");
  if (flag(*body, "clear")) queue_.clear_history();
  if (body->contains("delete")) queue_.delete_history(ids_of(*body));
  return empty_ok();
}

http_reply comfy_api::interrupt(const http_request& req) {
  // ComfyUI: with a prompt_id, only that prompt, and only while it runs.
  if (!req.body.empty()) {
    auto body = executor::parse_bounded_json(req.body);
    if (body && body->is_object())
      if (auto it = body->find("prompt_id"); it != body->end() && it->is_string()) {
        if (queue_.running_id() != it->get<std::string>()) return empty_ok();
      }
  }
  if (queue_.running_id()) executor_->interrupt();
  return empty_ok();
}

http_reply comfy_api::free(const http_request& req) {
  auto body = executor::parse_bounded_json(req.body.empty() ? std::string("{}") : req.body);
  if (!body || !body->is_object()) return bad_request("the body must be a JSON object");
  const bool unload = flag(*body, "unload_models");
  const bool drop = flag(*body, "free_memory");
  if (!unload && !drop) return empty_ok();
  // ComfyUI's free_memory resets its executor, whose caches go with it: between prompts (at
  // once when none runs).
  json cache = nullptr;
  if (drop) {
    const auto dropped = executor_->clear_cache();
    cache = {{"dropped_nodes", dropped.value_or(0)}, {"deferred", !dropped.has_value()}};
  }
  // What ComfyUI does not answer, comfy-orch adds: each worker's receipt, and the cache's.
  json receipts = json::object();
  // A worker inside a node answers after it: not waited for here (the API thread never waits
  // on a worker; its receipt goes to the log).
  for (const auto& [env, r] : host_.free_all(unload, drop, /*wait_for_busy=*/false))
    receipts[env] = r ? *r : json{{"error", r.err().message}};
  return json_reply({{"orch_receipts", receipts}, {"orch_cache", cache}});
}

}  // namespace orch::serve
