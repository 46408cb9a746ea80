#include "orch/runtime/plugin_selection.hpp"

#include <tuple>

#include "orch/plugin/levels.h"
#include "orch/plugin/plugin.h"

namespace orch::runtime {
namespace {

bool is_ledger(const plugins::plugin_entry& e) {
  return (e.capabilities & ORCH_CAP_LEDGER) != 0;
}

std::vector<const plugins::plugin_entry*> of_kind(const std::vector<plugins::plugin_entry>& found,
                                                  const std::string& backend,
                                                  const std::string& kind, bool ledger) {
  std::vector<const plugins::plugin_entry*> out;
  for (const auto& e : found) {
    if (e.backend == backend && e.kind == kind && (kind != "pager" || is_ledger(e) == ledger)) {
      out.push_back(&e);
    }
  }
  return out;
}

// Everything a level below L3 or L4 cannot carry, with the host's values.
std::vector<dropped_setting> settings_dropped_at(unsigned level, const pager_settings& s) {
  std::vector<dropped_setting> out;
  if (level < ORCH_LEVEL_HEADROOM) {
    out.push_back({"simple_headroom", std::to_string(s.simple_headroom), ORCH_LEVEL_HEADROOM});
    out.push_back({"extra_headroom", std::to_string(s.extra_headroom), ORCH_LEVEL_HEADROOM});
  }
  if (level < ORCH_LEVEL_PRESSURE) {
    out.push_back({"pressure_source", std::to_string(s.pressure_source), ORCH_LEVEL_PRESSURE});
    out.push_back({"log_callback", s.log_callback ? "on" : "off", ORCH_LEVEL_PRESSURE});
  }
  return out;
}

}  // namespace

std::optional<plugins::plugin_entry> host_pager(const std::vector<plugins::plugin_entry>& found,
                                                const std::string& backend) {
  const plugins::plugin_entry* best = nullptr;
  for (const auto* e : of_kind(found, backend, "pager", false)) {
    if (best == nullptr || e->max_level > best->max_level ||
        (e->max_level == best->max_level && e->name < best->name)) {
      best = e;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

worker_plugin_choice choose_worker_plugins(const std::vector<plugins::plugin_entry>& found,
                                           const std::string& backend, unsigned host_level,
                                           const plugins::plugin_entry* host_pager_entry,
                                           const pager_settings& settings) {
  worker_plugin_choice choice;
  choice.backend = backend;
  choice.host_level = host_level;
  const auto pagers = of_kind(found, backend, "pager", false);

  // Among pagers speaking the host level: the host pager's own name first, then the one that
  // speaks the most levels above, then name order, so the choice is reproducible.
  auto rank = [host_pager_entry](const plugins::plugin_entry* e) {
    const bool same = host_pager_entry != nullptr && e->name == host_pager_entry->name;
    return std::make_tuple(same ? 0 : 1, -static_cast<long>(e->max_level), e->name);
  };
  const plugins::plugin_entry* exact = nullptr;
  const plugins::plugin_entry* below = nullptr;
  for (const auto* e : pagers) {
    if (e->min_level <= host_level && host_level <= e->max_level) {
      if (exact == nullptr || rank(e) < rank(exact)) exact = e;
    } else if (e->max_level < host_level) {
      // The highest level below the host's keeps the most settings.
      if (below == nullptr ||
          std::make_tuple(-static_cast<long>(e->max_level), e->name) <
              std::make_tuple(-static_cast<long>(below->max_level), below->name)) {
        below = e;
      }
    }
  }

  if (exact != nullptr) {
    choice.pager = *exact;
    choice.level = host_level;
  } else if (below != nullptr) {
    choice.pager = *below;
    choice.level = below->max_level;
    choice.adapted = true;
    choice.dropped = settings_dropped_at(choice.level, settings);
  } else {
    choice.ledger_reason = "no pager plugin for backend " + backend;
  }
  // The ledger goes along even with a pager: the worker may still resolve to it (its pack's
  // ORCH_WORKER_PAGER=0, a CPU device, a pager that fails to start).
  if (const auto ledgers = of_kind(found, backend, "pager", true); !ledgers.empty()) {
    choice.ledger = *ledgers.front();
  }

  const unsigned allocator_level = choice.pager ? choice.level : host_level;
  for (const auto* e : of_kind(found, backend, "allocator", false)) {
    const bool fits = e->min_level <= allocator_level && allocator_level <= e->max_level;
    if (!choice.allocator || fits) choice.allocator = *e;
    if (fits) break;
  }

  if (choice.pager && host_pager_entry != nullptr &&
      choice.pager->version != host_pager_entry->version) {
    choice.notes.push_back("pager " + choice.pager->name + " " + choice.pager->version +
                           ", host pager " + host_pager_entry->name + " " +
                           host_pager_entry->version + ": versions differ, protocol level L" +
                           std::to_string(choice.level) + " matches" +
                           (choice.adapted ? " through the adapter" : "") + "; proceeding");
  }
  return choice;
}

std::vector<std::string> dropped_setting_lines(const std::string& env,
                                               const worker_plugin_choice& choice) {
  std::vector<std::string> lines;
  if (!choice.pager) return lines;
  for (const auto& d : choice.dropped) {
    lines.push_back("env " + env + ": pager " + choice.pager->name + " speaks L" +
                    std::to_string(choice.level) + ", host speaks L" +
                    std::to_string(choice.host_level) + ": dropped " + d.name + "=" + d.value +
                    " (needs L" + std::to_string(d.needs_level) + ")");
  }
  return lines;
}

}  // namespace orch::runtime
