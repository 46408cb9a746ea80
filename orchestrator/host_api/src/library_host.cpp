#include "library_host.hpp"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "host_errc.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/runtime/checked_call.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/runtime/memory_table.hpp"
#include "orch/support/base64.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::host_api {

using nlohmann::json;

result<std::unique_ptr<library_host>> library_host::start(
    const runtime::prepared_deployment& prepared, const std::string& worker_executable,
    const process::install_layout& layout, event_fn events) {
  auto host = runtime::start_deployment(prepared, worker_executable, layout);
  if (!host) return host.err();
  std::unique_ptr<library_host> lh(new library_host());
  lh->host_ = std::move(*host);
  for (const auto& pack : prepared.inventory.packs) {
    for (const auto& e : pack.envs) {
      lh->envs_.push_back({{"env", e.dir.env_name},
                           {"pack_dir", e.dir.pack_dir.string()},
                           {"node_dir", (e.dir.pack_dir / e.dir.relative_dir).string()},
                           {"config", e.dir.config.string()},
                           {"native", e.status.native},
                           {"state", manifests::to_string(e.status.state)},
                           {"interpreter", e.status.interpreter.string()},
                           {"detail", e.status.detail}});
    }
  }
  runtime::host_runtime& h = *lh->host_;
  if (events) {
    h.on_io_thread([&h, events] {
      h.workers().on_state = [events](const runtime::worker_info& w) {
        events("worker", {{"env", w.env},
                          {"pid", w.pid},
                          {"state", runtime::to_string(w.state)},
                          {"generation", w.generation},
                          {"error", w.last_error}});
      };
      h.workers().on_ui_message = [events](const std::string& env, const json& message) {
        // Bytes (a binary event's data, a preview's pixels) cross as base64 text.
        json data = message;
        data["env"] = env;
        if (data["data"].is_binary()) data["data"] = {{"base64", base64(data["data"].get_binary())}};
        if (data.contains("preview"))
          data["preview"]["pixels"] = base64(data["preview"]["pixels"].get_binary());
        events("message", data);
      };
      h.workers().on_progress = [events](const std::string& env, const json& progress) {
        // The channel delivers only bodies with the protocol's fields (ipc/src/message.cpp).
        json data = progress;
        data["env"] = env;
        events("progress", data);
      };
    });
  }
  runtime::settle_workers(h, [] { return false; });
  return lh;
}

library_host::~library_host() {
  stop();
}

json library_host::nodes() {
  runtime::host_runtime& h = *host_;
  return h.on_io_thread([this, &h] {
    json classes = json::object(), workers = json::array(), skipped = json::array();
    for (const auto& w : h.workers().workers()) {
      workers.push_back({{"env", w.env},
                         {"pid", w.pid},
                         {"state", runtime::to_string(w.state)},
                         {"generation", w.generation},
                         {"error", w.last_error}});
      if (!w.nodes.is_array()) continue;
      // The worker's own schema (RETURN_NAMES, tooltips and all) for each class the catalogue
      // gave to this worker: a class two envs provide stays with its first.
      for (const auto& n : w.nodes) {
        const std::string type = text_field(n, "class_type");
        const runtime::node_class* c = h.catalogue().find(type);
        if (c == nullptr || c->env != w.env || classes.contains(type)) continue;
        json schema = n;
        schema["env"] = w.env;
        classes[type] = std::move(schema);
      }
    }
    for (const auto& s : h.skipped()) skipped.push_back({{"env", s.env}, {"reason", s.reason}});
    json routes = json::array();
    for (const auto& [type, r] : h.catalogue().routes()) {
      json route = r.route;
      route["class_type"] = type;
      route["env"] = r.env;
      // An aiohttp route is served by its worker over HTTP, on the socket the host made.
      if (const runtime::worker_info* w = h.workers().find(r.env);
          w && route.value("aiohttp", false))
        route["socket"] = w->web_socket.string();
      for (const auto& e : envs_)  // the pack, for what ComfyUI's side says about the route
        if (e.value("env", "") == r.env)
          route["pack"] = std::filesystem::path(e.value("pack_dir", "")).filename().string();
      routes.push_back(std::move(route));
    }
    return json{{"classes", std::move(classes)},
                {"routes", std::move(routes)},
                {"workers", std::move(workers)},
                {"skipped", std::move(skipped)},
                {"envs", envs_}};
  });
}

std::vector<ipc::buffer_descriptor> library_host::held_descriptors() {
  std::lock_guard lock(mutex_);
  std::vector<ipc::buffer_descriptor> out;
  out.reserve(holds_.size());
  for (const auto& h : holds_) out.push_back(h.descriptor);
  return out;
}

result<json> library_host::call(const json& request) {
  if (!request.is_object() || !request.contains("node") || !request["node"].is_string() ||
      !request.contains("class_type") || !request["class_type"].is_string() ||
      (request.contains("inputs") && !request["inputs"].is_object())) {
    return error{host_errc::invalid_request,
                 "a call is an object with \"node\" and \"class_type\" strings and an "
                 "\"inputs\" object (docs/host-library.md)"};
  }
  const std::string type = request["class_type"].get<std::string>();
  const runtime::node_class* cls = host_->catalogue().find(type);
  if (cls == nullptr) cls = host_->catalogue().find_route(type);
  if (cls == nullptr) cls = host_->catalogue().find_internal(type);
  if (cls == nullptr) {
    return error{ipc::node_error_type::missing_node_type,
                 type +
                     " is neither a node class nor a route of any running worker "
                     "(orch_host_nodes lists them)"};
  }
  json body{{"node", request["node"]},
            {"class_type", type},
            {"epoch", epoch_.load()},
            {"inputs", request.value("inputs", json::object())}};
  for (const char* key : {"hidden", "method"})
    if (request.contains(key)) body[key] = request[key];
  const auto held = held_descriptors();
  auto c = runtime::call_with_retry(*host_, cls->env, body, held);
  json handed = json::array();
  {
    std::lock_guard lock(mutex_);
    for (const auto& d : c.handed) {
      holds_.push_back({d, false});
      handed.push_back(ipc::descriptor_to_json(d));
    }
  }
  if (!c.response) {
    // Refused before it was sent (an input naming a block not held) is the request's fault;
    // anything after is the call's.
    if (c.response.err().code == runtime::runtime_errc::invalid_input) return c.response.err();
    return json{{"status", "error"},
                {"error",
                 {{"node", request["node"]},
                  {"type", c.response.err().code},
                  {"message", c.response.err().message}}},
                {"held", std::move(handed)}};
  }
  json r = std::move(*c.response);
  r["held"] = std::move(handed);
  return r;
}

result<library_host::block> library_host::allocate(std::uint64_t size) {
  runtime::host_runtime& h = *host_;
  auto b = h.on_io_thread([&]() -> result<block> {
    auto d = h.memory().leases().allocate(runtime::host_slot, size);
    if (!d) return d.err();
    auto bytes = h.memory().pool().bytes(*d);
    if (!bytes) {
      (void)h.memory().leases().free(*d, runtime::host_slot);
      return bytes.err();
    }
    return block{*d, bytes->data()};
  });
  if (b) {
    std::lock_guard lock(mutex_);
    holds_.push_back({b->descriptor, true});
  }
  return b;
}

result<void*> library_host::map(const ipc::buffer_descriptor& d) {
  {
    std::lock_guard lock(mutex_);
    if (std::none_of(holds_.begin(), holds_.end(),
                     [&](const hold& h) { return h.descriptor == d; }))
      return error{host_errc::not_held, "this block is not one the caller holds"};
  }
  runtime::host_runtime& h = *host_;
  return h.on_io_thread([&]() -> result<void*> {
    auto bytes = h.memory().pool().bytes(d);
    if (!bytes) return bytes.err();
    return static_cast<void*>(bytes->data());
  });
}

orch::status library_host::release(const ipc::buffer_descriptor& d) {
  bool owned = false;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(holds_.begin(), holds_.end(),
                           [&](const hold& h) { return h.descriptor == d; });
    if (it == holds_.end())
      return error{host_errc::not_held,
                   "this block is not one the caller holds (released twice?)"};
    owned = it->owned;
    holds_.erase(it);
  }
  runtime::host_runtime& h = *host_;
  return h.on_io_thread([&]() -> orch::status {
    return owned ? h.memory().leases().free(d, runtime::host_slot)
                 : h.memory().leases().release(d, runtime::host_slot);
  });
}

json library_host::free(bool unload_models, bool free_memory) {
  json receipts = json::object();
  for (const auto& [env, r] : host_->free_all(unload_models, free_memory))
    receipts[env] = r ? *r : json{{"error", r.err().message}};
  return receipts;
}

json library_host::models() {
  runtime::host_runtime& h = *host_;
  return h.on_io_thread([&h] {
    std::map<std::string, std::uint32_t> generations;
    for (const auto& w : h.workers().workers()) generations[w.env] = w.generation;
    json out = json::array();
    for (const auto& e : h.stand_ins().entries()) {
      if (!e.is_stand_in()) continue;
      out.push_back({{"env", e.env},
                     {"key", e.id.substr(e.env.size() + 1)},  // ids are "<env>/<key>"
                     {"size", e.size},
                     {"resident", e.resident},
                     {"sequence", e.receipt_seq},
                     {"generation", generations[e.env]}});
    }
    return out;
  });
}

result<json> library_host::evict(const std::string& env, std::uint32_t generation,
                                 std::uint64_t bytes) {
  return host_->evict_env(env, generation, bytes);
}

// On the io thread: a reservation past the host's grant grows the grant (host_memory's grant
// source), which is io-thread state shared with the pool and the workers' grant requests.
orch::status library_host::pinned_reserve(std::uint64_t bytes) {
  auto st = host_->on_io_thread([&] { return host_->memory().host_budget().reserve(bytes); });
  if (st) caller_pinned_.fetch_add(bytes);
  return st;
}

// A release only lowers this slot's own counter, which is safe from any thread.
void library_host::pinned_release(std::uint64_t bytes) {
  std::uint64_t held = caller_pinned_.load();
  std::uint64_t take = 0;
  do {
    take = std::min(held, bytes);
  } while (!caller_pinned_.compare_exchange_weak(held, held - take));
  host_->memory().host_budget().release(take);
}

json library_host::status_json() {
  runtime::host_runtime& h = *host_;
  return h.on_io_thread([this, &h] {
    json workers = json::array();
    for (const auto& w : h.workers().workers()) {
      workers.push_back({{"env", w.env},
                         {"pid", w.pid},
                         {"state", runtime::to_string(w.state)},
                         {"generation", w.generation},
                         {"losses", w.losses},
                         {"manager", w.manager},
                         {"error", w.last_error}});
    }
    return json{{"workers", std::move(workers)},
                {"memory", to_json(runtime::read_memory_table(h))}};
  });
}

void library_host::interrupt() {
  runtime::host_runtime& h = *host_;
  const std::uint64_t epoch = epoch_.load();
  h.on_io_thread([&h, epoch] { h.workers().interrupt(epoch); });
}

void library_host::stop() {
  if (stopped_ || !host_) return;
  stopped_ = true;
  std::vector<hold> holds;
  {
    std::lock_guard lock(mutex_);
    holds.swap(holds_);
  }
  runtime::host_runtime& h = *host_;
  h.on_io_thread([&] {
    for (const auto& x : holds) {
      (void)(x.owned ? h.memory().leases().free(x.descriptor, runtime::host_slot)
                     : h.memory().leases().release(x.descriptor, runtime::host_slot));
    }
  });
  h.shutdown();
  // A block still held is one the caller may still read (a view in ComfyUI's cache): its bytes
  // stay mapped, stale, rather than vanish under it. After shutdown: the supervisor used the
  // lease table to the end, and the io thread is gone, so nothing else touches the memory.
  if (!holds.empty()) h.memory().keep_pool_mapped();
}

}  // namespace orch::host_api
