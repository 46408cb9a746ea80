#include "orch/live/process_status.hpp"

#include <unistd.h>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/runtime/memory_table.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

// What mem_get_info reports as free on a device of this kind: Linux drivers report the whole
// device ("device"); the sim device is configured to either, WDDM's per-process view included.
json free_view_of(const manifests::device_spec& device, const manifests::deployment& d) {
  switch (device.kind) {
    case manifests::device_kind::cpu:
      return nullptr;
    case manifests::device_kind::sim:
      return manifests::to_string(d.host.sim.mode);
    default:
      return "device";
  }
}

json plugins_of(const ipc::stats_snapshot& s) {
  json out = json::array();
  const char* slots[] = {"pager", "allocator", "backend"};
  for (std::uint32_t i = 0; i < ipc::plugin_slot_count; ++i) {
    const auto& p = s.plugins[i];
    const auto name = ipc::get_text(p.name);
    if (name.empty()) continue;
    // Bytes a worker wrote into shared memory: made valid text before they reach JSON.
    out.push_back({{"slot", slots[i]},
                   {"name", printable(name)},
                   {"version", printable(ipc::get_text(p.version))},
                   {"level", p.level}});
  }
  return out;
}

json dropped_of(const runtime::worker_plugin_choice& choice) {
  json out = json::array();
  for (const auto& d : choice.dropped) {
    out.push_back({{"name", d.name}, {"value", d.value}, {"needs_level", d.needs_level}});
  }
  return out;
}

// The fields every process has, from its memory-table row.
json base_entry(const runtime::memory_row& r) {
  return {{"process", r.process},
          {"mode", r.mode},
          {"mode_reason", r.mode == "in-process" ? json(r.reason) : json(nullptr)},
          {"pid", r.pid},
          {"state", r.state},
          {"env_path", nullptr},
          {"manager", r.manager},
          {"manager_reason", r.mode == "in-process" ? std::string() : r.reason},
          {"level", r.level},
          {"plugins", json::array()},
          {"dropped_settings", json::array()},
          {"device", nullptr},
          {"free_view", nullptr},
          {"device_total_bytes", r.device_total},
          {"device_free_bytes", r.device_free},
          {"pager_resident_bytes", 0},
          {"ledger_loaded_bytes", 0},
          {"device_pinned_bytes", 0},
          {"pinned_reserved_bytes", r.pinned_reserved},
          {"pinned_grant_bytes", 0},
          {"budget_bytes", r.budget},
          {"cast_buffer_bytes", r.cast_now},
          {"cast_high_water_bytes", r.cast_high_water},
          {"cast_streams", 0},
          {"cast_largest_bytes", 0},
          {"cast_bound_bytes", nullptr},
          {"epoch", 0},
          {"calls", 0},
          {"boundary_releases", r.boundary_releases},
          {"generation", 0},
          {"restarts", 0},
          {"settings_match", r.settings_match},
          {"applied_settings", json::object()},
          {"expected_settings", json::object()},
          {"divergence_acknowledged", false},
          {"memory_view", nullptr},
          {"models", json::array()}};
}

// The figures of a worker's memory_view that are numbers (a worker's text is not trusted).
json memory_view_of(const json& plugins) {
  const json& view = object_field(plugins, "memory_view");
  if (view.empty()) return nullptr;
  json out = json::object();
  for (const char* key :
       {"budget_bytes", "physical_ram_bytes", "cgroup_limit_bytes", "own_budget_bytes"}) {
    const auto it = view.find(key);
    out[key] = it != view.end() && it->is_number_unsigned() ? *it : json(nullptr);
  }
  return out;
}

// The worker's last models report, each with the host's stand-in for it (if any).
json models_of(runtime::host_runtime& host, const std::string& env) {
  json out = json::array();
  for (const auto& m : host.reported_models(env)) {  // validated by the supervisor
    const std::string key = m["key"].get<std::string>();
    const runtime::model_entry* stand_in = host.stand_ins().find(env + "/" + key);
    out.push_back({{"key", printable(key)},
                   {"size_bytes", m["size"]},
                   {"resident_bytes", m["resident"]},
                   {"stand_in", stand_in != nullptr},
                   {"stand_in_resident_bytes",
                    stand_in != nullptr ? json(stand_in->resident) : json(nullptr)}});
  }
  return out;
}

void add_worker_figures(json& e, runtime::host_runtime& host, const runtime::worker_info& w) {
  auto& control = host.memory().control();
  e["generation"] = w.generation;
  e["restarts"] = w.losses;
  e["divergence_acknowledged"] = w.divergence_acknowledged;
  if (!w.last_error.empty()) e["last_error"] = printable(w.last_error);
  if (w.retry_at) {  // a crash loop failed it: when it is started again
    e["retry_in_ms"] = std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(*w.retry_at -
                                                                 std::chrono::steady_clock::now())
               .count());
    e["crash_loops"] = w.crash_loops;
    // The longest it can stay down, however many loops follow.
    e["max_retry_ms"] =
        runtime::crash_loop_cool_down(host.deployment().workers.failed_retry, 1 << 30).count();
  }
  const runtime::worker_spec* spec = host.workers().spec_of(w.env);
  if (spec != nullptr) {
    e["env_path"] = (spec->python ? spec->python->interpreter : spec->library).string();
    e["device"] = spec->device.to_string();
    e["free_view"] = free_view_of(spec->device, host.deployment());
    e["dropped_settings"] = dropped_of(spec->plugins);
    e["cast_streams"] = spec->memory.streams;
  }
  if (w.state != runtime::worker_state::ready) return;
  e["pinned_grant_bytes"] = control.grant(w.slot);
  e["memory_view"] = memory_view_of(w.plugins);
  e["models"] = models_of(host, w.env);
  // A worker's text: the canonical text is a few dozen bytes, so anything past 1 KiB is not it.
  e["applied_settings"] =
      settings_fields(text_field(w.plugins, "applied_settings").substr(0, 1024));
  if (spec != nullptr) {
    const auto manager = w.manager == "pager" ? plugins::memory_manager::pager
                                              : plugins::memory_manager::ledger;
    const unsigned level = manager == plugins::memory_manager::pager ? spec->plugins.level : 0;
    e["expected_settings"] =
        settings_fields(plugins::applied_settings_text(spec->memory, manager, level));
  }
  const auto stats = control.block(w.slot).read();
  if (!stats) return;
  e["plugins"] = plugins_of(*stats);
  e["pager_resident_bytes"] = stats->pager_resident_bytes;
  e["ledger_loaded_bytes"] = stats->ledger_loaded_bytes;
  e["device_pinned_bytes"] = stats->device_pinned_bytes;
  e["epoch"] = stats->current_epoch;
  e["calls"] = stats->call_count;
  e["cast_largest_bytes"] = stats->cast_buffer_largest;
  // Buffers reused in place hold at most one per stream, each no larger than the largest:
  // a high water above that is buffers kept past their replacement (the ratchet).
  if (stats->cast_buffer_largest > 0 && spec != nullptr && spec->memory.streams > 0) {
    e["cast_bound_bytes"] = stats->cast_buffer_largest * spec->memory.streams;
  }
}

void add_host_figures(json& e, runtime::host_runtime& host) {
  const auto& d = host.deployment();
  e["device"] = d.host.device.to_string();
  e["free_view"] = free_view_of(d.host.device, d);
  e["pinned_grant_bytes"] = host.memory().control().grant(runtime::host_slot);
  if (const auto& pager = host.plan().host_pager()) {
    e["plugins"].push_back(
        {{"slot", "pager"}, {"name", pager->name}, {"version", pager->version},
         {"level", host.plan().host_level()}});
  }
  if (auto* device = host.memory().backend()) {
    std::uint64_t free_bytes = 0, total = 0;
    if (device->api().mem_get_info(device->device(), &free_bytes, &total) == ORCH_OK) {
      e["device_total_bytes"] = total;
      e["device_free_bytes"] = free_bytes;
    }
  }
  const auto settings = host.plan().memory_settings_for(d.host.device);
  const auto text = plugins::applied_settings_text(settings, host.plan().host_manager().manager,
                                                   host.plan().host_level());
  e["applied_settings"] = settings_fields(text);
  e["expected_settings"] = e["applied_settings"];
  json view = {{"budget_bytes", host.memory().budget_bytes()},
               {"physical_ram_bytes", nullptr},
               {"cgroup_limit_bytes", nullptr},
               {"own_budget_bytes", host.memory().budget_bytes()}};
  if (auto readings = ipc::probe_memory_readings()) {
    view["physical_ram_bytes"] = readings->physical_ram;
    if (readings->cgroup_limit) view["cgroup_limit_bytes"] = *readings->cgroup_limit;
  }
  e["memory_view"] = std::move(view);
}

}  // namespace

json settings_fields(const std::string& text) {
  json out = json::object();
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string field = text.substr(start, end - start);
    const auto eq = field.find('=');
    if (eq != std::string::npos && eq > 0) {
      out[printable(field.substr(0, eq))] = printable(field.substr(eq + 1));
    }
    start = end + 1;
  }
  return out;
}

json read_process_status(runtime::host_runtime& host) {
  const auto rows = runtime::read_memory_table(host);
  json processes = json::array();
  std::uint64_t reserved = 0;
  for (const auto& r : rows) {
    json e = base_entry(r);
    reserved += r.pinned_reserved;
    if (r.mode == "host") add_host_figures(e, host);
    if (const runtime::worker_info* w =
            r.mode == "worker" ? host.workers().find(r.process) : nullptr) {
      add_worker_figures(e, host, *w);
    }
    processes.push_back(std::move(e));
  }
  json doc = {{"pid", static_cast<long>(::getpid())},
              {"budget_bytes", host.memory().budget_bytes()},
              {"pinned_reserved_bytes", reserved},
              {"physical_ram_bytes", nullptr},
              {"cgroup_limit_bytes", nullptr},
              {"processes", std::move(processes)}};
  if (auto readings = ipc::probe_memory_readings()) {
    doc["physical_ram_bytes"] = readings->physical_ram;
    if (readings->cgroup_limit) doc["cgroup_limit_bytes"] = *readings->cgroup_limit;
  }
  return doc;
}

}  // namespace orch::live
