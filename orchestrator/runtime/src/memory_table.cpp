#include "orch/runtime/memory_table.hpp"

#include <unistd.h>

#include <iomanip>
#include <sstream>

#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {
namespace {

std::string mib(std::uint64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0)
    << " MiB";
  return s.str();
}

const char* manager_name(ipc::memory_manager_kind k) {
  switch (k) {
    case ipc::memory_manager_kind::pager:
      return "pager";
    case ipc::memory_manager_kind::ledger:
      return "ledger";
    default:
      return "-";
  }
}

}  // namespace

std::vector<memory_row> read_memory_table(host_runtime& host) {
  std::vector<memory_row> rows;
  auto& control = host.memory().control();
  memory_row h;
  h.process = "host";
  h.mode = "host";
  h.pid = static_cast<long>(::getpid());
  h.state = "running";
  h.manager = plugins::to_string(host.plan().host_manager().manager);
  h.reason = host.plan().host_manager().reason;
  h.level = host.plan().host_level();
  h.pinned_reserved = host.memory().host_budget().reserved();
  h.budget = control.budget();
  rows.push_back(h);
  for (const auto& w : host.workers().workers()) {
    memory_row r;
    r.process = w.env;
    r.mode = "worker";
    r.pid = w.pid;
    r.state = to_string(w.state);
    r.budget = control.budget();
    r.manager = "-";
    if (w.state == worker_state::ready) {
      if (auto stats = control.block(w.slot).read()) {
        r.manager = manager_name(stats->memory_manager);
        // Bytes a worker wrote into shared memory: printable for the table, valid for JSON.
        r.reason = printable(ipc::get_text(stats->memory_manager_reason));
        r.level = stats->plugins[static_cast<int>(ipc::plugin_slot::pager)].level;
        r.device_resident = stats->pager_resident_bytes + stats->ledger_loaded_bytes;
        r.device_total = stats->device_total_bytes;
        r.device_free = stats->device_free_bytes;
        r.cast_now = stats->cast_buffer_bytes;
        r.cast_high_water = stats->cast_buffer_high_water;
        r.boundary_releases = stats->boundary_releases;
      }
      r.settings_match = w.settings_match;
      // Counted host-side: a slot's own word is a claim, clamped to its grant.
      r.pinned_reserved = control.counted_reserved(w.slot);
      if (control.flagged(w.slot)) {
        r.reason += std::string(r.reason.empty() ? "" : "; ") +
                    "claimed more pinned memory than it was granted: counted as its grant";
      }
    }
    rows.push_back(r);
  }
  for (const auto& s : host.skipped()) {
    memory_row r;
    r.process = s.env;
    r.mode = "in-process";
    r.state = "skipped";
    r.manager = "-";
    r.reason = s.reason;
    r.budget = control.budget();
    rows.push_back(r);
  }
  return rows;
}

device_figures device_figures_of(const std::vector<memory_row>& rows) {
  device_figures d;
  std::uint64_t resident = 0;
  for (const auto& r : rows) {
    resident += r.device_resident;
    if (r.device_total > d.total) {
      d.total = r.device_total;
      d.free = r.device_free;
    }
  }
  if (d.free == 0 && d.total > resident) d.free = d.total - resident;
  return d;
}

std::string format_memory_table(const std::vector<memory_row>& rows) {
  std::ostringstream s;
  auto line = [&](const std::vector<std::string>& c) {
    s << std::left << std::setw(22) << c[0] << std::setw(11) << c[1] << std::setw(8) << c[2]
      << std::setw(9) << c[3] << std::setw(8) << c[4] << std::setw(6) << c[5] << std::right
      << std::setw(16) << c[6] << std::setw(16) << c[7] << std::setw(12) << c[8]
      << std::setw(16) << c[9] << std::setw(10) << c[10] << std::setw(10) << c[11] << '\n';
  };
  line({"process", "mode", "pid", "state", "manager", "level", "device resident",
        "pinned reserved", "cast now", "cast high-water", "releases", "settings"});
  std::uint64_t pinned = 0, budget = 0;
  for (const auto& r : rows) {
    const bool running = r.mode != "in-process";
    line({r.process, r.mode, running ? std::to_string(r.pid) : "-", r.state, r.manager,
          r.level == 0 ? "-" : "L" + std::to_string(r.level),
          running ? mib(r.device_resident) : "-", running ? mib(r.pinned_reserved) : "-",
          running ? mib(r.cast_now) : "-", running ? mib(r.cast_high_water) : "-",
          r.mode == "worker" ? std::to_string(r.boundary_releases) : "-",
          r.mode == "worker" ? (r.settings_match ? "match" : "MISMATCH") : "-"});
    pinned += r.pinned_reserved;
    budget = r.budget;
  }
  s << "\nwhy:\n";
  for (const auto& r : rows) {
    if (r.reason.empty()) continue;
    s << "  " << r.process << ": " << (r.mode == "in-process" ? "not isolated" : r.manager) << " ("
      << r.reason << ")\n";
  }
  s << "pinned reservations: " << mib(pinned) << " of one budget of " << mib(budget)
    << (pinned <= budget ? "" : "  OVER BUDGET") << '\n';
  return s.str();
}

nlohmann::json to_json(const std::vector<memory_row>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"process", r.process},
                   {"mode", r.mode},
                   {"pid", r.pid},
                   {"state", r.state},
                   {"manager", r.manager},
                   {"reason", r.reason},
                   {"level", r.level},
                   {"device_resident_bytes", r.device_resident},
                   {"pinned_reserved_bytes", r.pinned_reserved},
                   {"cast_buffer_bytes", r.cast_now},
                   {"cast_buffer_high_water_bytes", r.cast_high_water},
                   {"boundary_releases", r.boundary_releases},
                   {"settings_match", r.settings_match},
                   {"budget_bytes", r.budget}});
  }
  return out;
}

}  // namespace orch::runtime
