#include "orch/orchestrator/memory_table.hpp"

#include <unistd.h>

#include <iomanip>
#include <sstream>

namespace orch::orchestrator {
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
  h.pid = static_cast<long>(::getpid());
  h.state = "running";
  h.manager = "-";  // the host runs no node code (issue 6 resolves its manager)
  h.pinned_reserved = host.memory().host_budget().reserved();
  h.budget = control.budget();
  rows.push_back(h);
  for (const auto& w : host.workers().workers()) {
    memory_row r;
    r.process = w.env;
    r.pid = w.pid;
    r.state = to_string(w.state);
    r.budget = control.budget();
    if (w.state == worker_state::ready) {
      auto stats = control.block(w.slot).read();
      if (stats) {
        r.manager = manager_name(stats->memory_manager);
        r.level = stats->plugins[static_cast<int>(ipc::plugin_slot::pager)].level;
        r.pager_resident = stats->pager_resident_bytes;
        r.cast_high_water = stats->cast_buffer_high_water;
      }
      r.pinned_reserved = control.slot(w.slot).reserved.load(std::memory_order_acquire);
    } else {
      r.manager = "-";
    }
    rows.push_back(r);
  }
  return rows;
}

std::string format_memory_table(const std::vector<memory_row>& rows) {
  std::ostringstream s;
  auto line = [&](const std::string& a, const std::string& b, const std::string& c,
                  const std::string& d, const std::string& e, const std::string& f,
                  const std::string& g, const std::string& h, const std::string& i) {
    s << std::left << std::setw(22) << a << std::setw(8) << b << std::setw(9) << c
      << std::setw(8) << d << std::setw(6) << e << std::right << std::setw(14) << f
      << std::setw(16) << g << std::setw(16) << h << std::setw(14) << i << '\n';
  };
  line("process", "pid", "state", "manager", "level", "pager resident", "pinned reserved",
       "cast high-water", "budget");
  for (const auto& r : rows) {
    line(r.process, std::to_string(r.pid), r.state, r.manager,
         r.level == 0 ? "-" : "L" + std::to_string(r.level), mib(r.pager_resident),
         mib(r.pinned_reserved), mib(r.cast_high_water), mib(r.budget));
  }
  return s.str();
}

nlohmann::json to_json(const std::vector<memory_row>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"process", r.process},
                   {"pid", r.pid},
                   {"state", r.state},
                   {"manager", r.manager},
                   {"level", r.level},
                   {"pager_resident_bytes", r.pager_resident},
                   {"pinned_reserved_bytes", r.pinned_reserved},
                   {"cast_buffer_high_water_bytes", r.cast_high_water},
                   {"budget_bytes", r.budget}});
  }
  return out;
}

}  // namespace orch::orchestrator
