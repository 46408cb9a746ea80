// The supervisor's memory side (DESIGN.md §4.6, §4.7): the settings each worker is sent, the
// divergence report when it is ready, the models reports that keep its stand-ins, and the free
// and evict requests answered with receipts. Process supervision is in supervisor.cpp.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "json_fields.hpp"
#include "orch/orchestrator/supervisor.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::orchestrator {
namespace {

using nlohmann::json;

// A worker's models report: [{key text, size uint, resident uint}] with a sequence >= 1.
bool valid_models_report(const json& body) {
  auto seq = body.find("sequence");
  auto models = body.find("models");
  if (seq == body.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0 ||
      models == body.end() || !models->is_array()) {
    return false;
  }
  return std::all_of(models->begin(), models->end(), [](const json& m) {
    return m.is_object() && m.contains("key") && m["key"].is_string() && m.contains("size") &&
           m["size"].is_number_unsigned() && m.contains("resident") &&
           m["resident"].is_number_unsigned();
  });
}

}  // namespace

json supervisor::settings_for(const worker& w) const {
  // The host settings that shape the worker's memory, as one object the worker reads back
  // (worker_memory.hpp host_settings). The pool segments are listed in the order their fds were
  // sent: each receiver checks an fd against what the host announced before mapping it.
  json segments = json::array();
  for (std::size_t i = 0; i < memory_.pool().segment_count(); ++i) {
    const auto& seg = memory_.pool().segment(i);
    segments.push_back({{"segment", seg.id()}, {"total_size", seg.total_size()}});
  }
  const auto& p = w.spec.plugins;
  const auto& m = w.spec.memory;
  auto path = [](const auto& entry) { return entry ? entry->path.string() : std::string(); };
  return {{"slot", w.info.slot},
          {"pool_segments", segments},
          {"device", manifests::to_string(w.spec.device.kind)},
          {"ordinal", w.spec.device.index},
          {"backend_plugin", w.spec.backend_plugin},
          {"host_manager", plugins::to_string(options_.host_manager.manager)},
          {"level", p.pager ? p.level : p.host_level},
          {"pager_plugin", path(p.pager)},
          {"ledger_plugin", path(p.ledger)},
          {"allocator_plugin", path(p.allocator)},
          {"no_pager_reason", p.ledger_reason.value_or("")},
          {"streams", m.streams},
          {"page_size", m.page_size},
          {"reserve_vram", m.reserve_vram},
          {"simple_headroom", m.simple_headroom},
          {"pressure_source", m.pressure_source},
          {"pinned_memory", m.pinned_memory},
          {"heartbeat_ms", static_cast<std::uint64_t>(options_.timing.heartbeat_interval.count())},
          {"generation", w.info.generation}};
}

void supervisor::report_divergence(worker& w) {
  const json& p = w.info.plugins;
  w.info.manager = text_field(p, "manager");
  w.info.manager_reason = printable(text_field(p, "reason"));  // a pack's text, for the table
  const auto manager = w.info.manager == "pager" ? plugins::memory_manager::pager
                                                 : plugins::memory_manager::ledger;
  const unsigned level = manager == plugins::memory_manager::pager ? w.spec.plugins.level : 0;
  const std::uint64_t expected = plugins::applied_settings_hash(w.spec.memory, manager, level);
  // The worker published its snapshot before it sent ready.
  const auto stats = memory_.control().block(w.info.slot).read();
  const std::uint64_t published = stats ? stats->settings_hash : 0;
  w.info.settings_match = published == expected;
  if (!w.info.settings_match) {
    spdlog::warn("worker {}: applied memory settings hash {:016x}, the host expects {:016x}: "
                 "the worker runs other settings than the host sent (a stale build?)",
                 w.spec.env, published, expected);
  }
  // ORCH_DIVERGENCE_ACK in the pack's [env_vars] (which win, as in the worker's environment) or
  // the operator's shell: intended divergence, when it reads as set.
  std::optional<std::string> ack;
  if (auto it = options_.operator_env.find(divergence_ack_variable);
      it != options_.operator_env.end()) {
    ack = it->second;
  }
  for (const auto& [name, value] : w.spec.env_vars) {
    if (name == divergence_ack_variable) ack = value;
  }
  const bool acknowledged = ack && plugins::reads_as_on(plugins::read_flag(*ack));
  worker_memory_report report{w.spec.env, {manager, w.info.manager_reason}, w.spec.plugins.notes,
                              acknowledged};
  for (const auto& line : divergence_.on_worker_ready(report)) {
    if (line.level == report_level::warning) {
      spdlog::warn("{}", line.text);
    } else {
      spdlog::info("{}", line.text);
    }
  }
}

void supervisor::report_models(const std::string& env, const json& body) {
  if (!on_models || !body.is_object() || !body.contains("models")) return;
  if (!valid_models_report(body)) {
    spdlog::warn("worker {}: ignored a malformed models report", env);
    return;
  }
  on_models(env, body["models"], body["sequence"].get<std::uint64_t>());
}

void supervisor::request_release(worker& w, ipc::message_type type, json body, call_done done) {
  // A release's receipt carries the worker's models: the stand-ins follow it, unless the worker
  // was lost meanwhile (its stand-ins went with it).
  std::weak_ptr<worker> weak = w.self;
  w.channel->request(type, std::move(body), w.spec.call_timeout,
                     [this, weak, done = std::move(done), env = w.spec.env](
                         result<ipc::message> r) {
                       if (auto wp = weak.lock(); wp && r) report_models(env, r->body);
                       done(r ? result<json>(std::move(r->body)) : result<json>(r.err()));
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
    return done(error{"not_ready", "no ready worker runs env " + env});
  }
  request_release(*it->second, ipc::message_type::evict, {{"bytes", bytes}}, std::move(done));
}

}  // namespace orch::orchestrator
