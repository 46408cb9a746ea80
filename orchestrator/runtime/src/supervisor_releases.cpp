// The supervisor's releases (docs/memory-semantics.md): the host's free and evict requests sent to
// the workers and answered with receipts, the models reports that keep the host's stand-ins, and
// what a call that ran out of device memory needs freed before its retry.
#include <spdlog/spdlog.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/response_bodies.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/runtime/supervisor.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::runtime {

using nlohmann::json;

void supervisor::report_models(const std::string& env, const json& body) {
  if (!on_models || !body.is_object() || !body.contains("models")) return;
  if (auto st = ipc::check_models_report(body); !st) {
    spdlog::warn("worker {}: ignored a models report: {}", env, st.err().message);
    return;
  }
  on_models(env, body["models"], body["sequence"].get<std::uint64_t>());
  if (auto it = workers_.find(env); it != workers_.end()) it->second->lane->models_applied(body["models"]);
}

std::uint64_t supervisor::device_bytes_required(const json& response) {
  const json& failure = object_field(response, "error");
  if (text_field(failure, "type") != ipc::node_error_type::out_of_memory) return 0;
  return unsigned_field(failure, "required");
}

void supervisor::request_release(worker& w, ipc::message_type type, json body, call_done done) {
  // A release's receipt carries the worker's models: the stand-ins follow it, unless the worker
  // was lost meanwhile (its stand-ins went with it).
  std::weak_ptr<worker> weak = w.self;
  w.channel->request(
      type, std::move(body), w.spec.call_timeout,
      [this, weak, done = std::move(done), env = w.spec.env](result<ipc::message> r) {
        if (!r) return done(r.err());
        if (auto st = ipc::check_release_receipt(r->body); !st) {
          return done(error{runtime_errc::bad_response, st.err().message});
        }
        if (auto wp = weak.lock()) report_models(env, r->body);
        done(std::move(r->body));
      });
}

std::size_t supervisor::free_memory(bool unload_models, bool drop_caches,
                                    std::function<void(const std::string&, result<json>)> done) {
  std::size_t sent = 0;
  for (auto& [env, w] : workers_) {
    if (w->info.state != worker_state::ready) continue;
    ++sent;
    request_release(*w, ipc::message_type::free_memory,
                    {{"unload_models", unload_models}, {"free_memory", drop_caches}},
                    [done, name = env](result<json> r) { done(name, std::move(r)); });
  }
  return sent;
}

void supervisor::evict(const std::string& env, std::uint64_t bytes, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end() || it->second->info.state != worker_state::ready) {
    return done(error{runtime_errc::not_ready, "no ready worker runs env " + env});
  }
  request_release(*it->second, ipc::message_type::evict, {{"bytes", bytes}}, std::move(done));
}

}  // namespace orch::runtime
