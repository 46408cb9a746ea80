#include "deployment_plan.hpp"

#include <sstream>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/pinned_budget.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/memory_plan.hpp"
#include "orch/runtime/worker_specs.hpp"

namespace orch::cli {
namespace {

using nlohmann::json;

json plugin_of(const std::optional<plugins::plugin_entry>& p, unsigned level) {
  if (!p) return nullptr;
  return {{"name", p->name}, {"version", p->version}, {"path", p->path.string()}, {"level", level}};
}

json expected_divergences(const runtime::worker_spec& spec, const plugins::manager_choice& host,
                          unsigned host_level) {
  json out = json::array();
  const bool pager = spec.plugins.pager.has_value();
  if (host.manager == plugins::memory_manager::pager && !pager) {
    out.push_back({{"kind", "manager"},
                   {"severity", "divergence"},
                   {"explanation", "the host pages weights but this worker will run the ledger: " +
                                       spec.plugins.ledger_reason.value_or("no pager plugin")},
                   {"fix", "give the pack a pager plugin for backend " + spec.plugins.backend +
                               " (ORCH_PLUGIN_PATH, or the deployment's [plugins] search_paths)"}});
  }
  if (pager && spec.plugins.adapted) {
    out.push_back(
        {{"kind", "plugin"},
         {"severity", "divergence"},
         {"explanation", "its pager speaks level " + std::to_string(spec.plugins.level) +
                             ", the host " + std::to_string(host_level) + ": the adapter drops " +
                             std::to_string(spec.plugins.dropped.size()) + " settings"},
         {"fix", "install a pager plugin that speaks level " + std::to_string(host_level) +
                     " for this pack"}});
  }
  for (const auto& note : spec.plugins.notes)
    out.push_back({{"kind", "plugin"}, {"severity", "note"}, {"explanation", note}, {"fix", ""}});
  if (spec.python) {
    out.push_back({{"kind", "manager"},
                   {"severity", "note"},
                   {"explanation",
                    "a Python worker resolves its manager at start from the "
                    "signal the host sends; `comfy-orch diverge` shows the outcome"},
                   {"fix", ""}});
  }
  return out;
}

}  // namespace

result<json> plan_deployment(const runtime::prepared_deployment& prepared,
                             const std::string& worker_executable, bool python_workers) {
  const auto& d = prepared.deployment;
  auto device = runtime::open_host_device(d);
  if (!device) return device.err();
  auto readings = ipc::probe_memory_readings();
  if (!readings) return readings.err();
  runtime::memory_plan plan =
      runtime::memory_plan::make(d, device->device.get(), worker_executable);
  const std::string backend_plugin =
      device->device ? device->device->library().path().string() : std::string();
  auto planned = runtime::plan_workers(d, prepared.inventory, plan, backend_plugin, python_workers,
                                       process::current_environment());
  const auto& host = plan.host_manager();
  json envs = json::array();
  for (const auto& spec : planned.specs) {
    const bool pager = spec.plugins.pager.has_value();
    json dropped = json::array();
    for (const auto& s : spec.plugins.dropped)
      dropped.push_back({{"name", s.name}, {"value", s.value}, {"needs_level", s.needs_level}});
    envs.push_back(
        {{"env", spec.env},
         {"runs", spec.python ? "python worker" : "native worker"},
         {"library", spec.python ? json(nullptr) : json(spec.library.string())},
         {"interpreter", spec.python ? json(spec.python->interpreter.string()) : json(nullptr)},
         {"device", spec.device.to_string()},
         {"backend_plugin", spec.backend_plugin},
         {"manager", pager ? "pager" : "ledger"},
         {"manager_reason", pager ? "a pager plugin serves backend " + spec.plugins.backend
                                  : spec.plugins.ledger_reason.value_or("no pager plugin")},
         {"level", pager ? spec.plugins.level : 0},
         {"plugins",
          {{"pager", plugin_of(spec.plugins.pager, spec.plugins.level)},
           {"ledger", plugin_of(spec.plugins.ledger, 0)},
           {"allocator", plugin_of(spec.plugins.allocator, spec.plugins.level)}}},
         {"dropped_settings", std::move(dropped)},
         {"expected_divergences", expected_divergences(spec, host, plan.host_level())}});
  }
  json skipped = json::array();
  for (const auto& s : planned.skipped) skipped.push_back({{"env", s.env}, {"reason", s.reason}});
  return json{{"host",
               {{"device", d.host.device.to_string()},
                {"manager", plugins::to_string(host.manager)},
                {"manager_reason", host.reason},
                {"level", plan.host_level()},
                {"pager", plugin_of(plan.host_pager(), plan.host_level())},
                {"budget_bytes", ipc::compute_pinned_budget(*readings).bytes}}},
              {"envs", std::move(envs)},
              {"no_worker", std::move(skipped)}};
}

std::string format_plan(const json& plan) {
  std::ostringstream out;
  const json& h = plan["host"];
  out << "host: " << h["device"].get<std::string>() << ", " << h["manager"].get<std::string>()
      << " (" << h["manager_reason"].get<std::string>() << "), level " << h["level"] << '\n';
  for (const auto& e : plan["envs"]) {
    out << "\nenv " << e["env"].get<std::string>() << ": " << e["runs"].get<std::string>() << " on "
        << e["device"].get<std::string>() << "\n  "
        << (e["library"].is_string() ? "library     " + e["library"].get<std::string>()
                                     : "interpreter " + e["interpreter"].get<std::string>())
        << "\n  manager     " << e["manager"].get<std::string>() << " ("
        << e["manager_reason"].get<std::string>() << "), level " << e["level"] << '\n';
    for (const char* slot : {"pager", "allocator", "ledger"}) {
      const json& p = e["plugins"][slot];
      if (p.is_null()) continue;
      out << "  " << slot << std::string(12 - std::string(slot).size(), ' ')
          << p["name"].get<std::string>() << ' ' << p["version"].get<std::string>() << "  "
          << p["path"].get<std::string>() << '\n';
    }
    for (const auto& s : e["dropped_settings"])
      out << "  dropped     " << s["name"].get<std::string>() << '='
          << s["value"].get<std::string>() << " (needs level " << s["needs_level"] << ")\n";
    for (const auto& x : e["expected_divergences"])
      out << "  expect      " << x["severity"].get<std::string>() << ": "
          << x["explanation"].get<std::string>()
          << (x["fix"].get<std::string>().empty()
                  ? ""
                  : "\n              fix: " + x["fix"].get<std::string>())
          << '\n';
  }
  for (const auto& s : plan["no_worker"])
    out << "\nenv " << s["env"].get<std::string>()
        << ": no worker: " << s["reason"].get<std::string>() << '\n';
  return out.str();
}

}  // namespace orch::cli
