#include "orch/live/live_text.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

// A server's text made safe for the terminal (another version, or not ours: --socket takes any
// path), as the server made a worker's.
std::string cell_text(const json& j) {
  if (j.is_string()) return printable(j.get<std::string>());
  return j.is_null() ? "-" : j.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr auto& at = field_or_null;

// Columns padded to their widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::ostringstream out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
  return out.str();
}

}  // namespace

std::string human_bytes(const json& bytes) {
  if (!bytes.is_number_unsigned() && !bytes.is_number_integer()) return "-";
  double v = bytes.get<double>();
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
  return text;
}

std::string format_status(const json& status) {
  std::ostringstream out;
  out << "pinned budget " << human_bytes(at(status, "budget_bytes")) << ", reserved "
      << human_bytes(at(status, "pinned_reserved_bytes")) << "; RAM "
      << human_bytes(at(status, "physical_ram_bytes")) << ", cgroup limit "
      << (at(status, "cgroup_limit_bytes").is_null()
              ? std::string("none")
              : human_bytes(at(status, "cgroup_limit_bytes")))
      << "; serve pid " << cell_text(at(status, "pid")) << "\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"PROCESS", "MODE", "MANAGER", "LVL", "DEVICE", "VIEW", "RESIDENT", "PINNED/GRANT",
       "CAST/HIGH/BOUND", "EPOCH", "CALLS", "GEN", "RESTARTS", "STATE"}};
  const json& processes = at(status, "processes");
  if (processes.is_array()) {
    for (const auto& p : processes) {
      const std::uint64_t resident =
          unsigned_field(p, "pager_resident_bytes") + unsigned_field(p, "ledger_loaded_bytes");
      rows.push_back({cell_text(at(p, "process")), cell_text(at(p, "mode")),
                      cell_text(at(p, "manager")), cell_text(at(p, "level")),
                      cell_text(at(p, "device")),
                      cell_text(at(p, "free_view")), human_bytes(resident),
                      human_bytes(at(p, "pinned_reserved_bytes")) + "/" +
                          human_bytes(at(p, "pinned_grant_bytes")),
                      human_bytes(at(p, "cast_buffer_bytes")) + "/" +
                          human_bytes(at(p, "cast_high_water_bytes")) + "/" +
                          human_bytes(at(p, "cast_bound_bytes")),
                      cell_text(at(p, "epoch")), cell_text(at(p, "calls")),
                      cell_text(at(p, "generation")), cell_text(at(p, "restarts")),
                      cell_text(at(p, "state")) +
                          (at(p, "settings_match") == false ? " SETTINGS MISMATCH" : "")});
    }
  }
  out << table(rows);
  if (!processes.is_array()) return out.str();
  for (const auto& p : processes) {
    std::ostringstream detail;
    if (at(p, "mode") == "in-process")
      detail << "    in-process: " << cell_text(at(p, "mode_reason")) << '\n';
    if (!cell_text(at(p, "manager_reason")).empty() && at(p, "manager_reason").is_string())
      detail << "    manager " << cell_text(at(p, "manager")) << ": "
             << cell_text(at(p, "manager_reason")) << '\n';
    const json& plugins = at(p, "plugins");
    if (plugins.is_array() && !plugins.empty()) {
      detail << "    plugins:";
      for (const auto& pl : plugins)
        detail << ' ' << cell_text(at(pl, "slot")) << '=' << cell_text(at(pl, "name")) << ' '
               << cell_text(at(pl, "version")) << " (L" << cell_text(at(pl, "level")) << ')';
      detail << '\n';
    }
    const json& dropped = at(p, "dropped_settings");
    if (dropped.is_array()) {
      for (const auto& d : dropped)
        detail << "    dropped by the adapter: " << cell_text(at(d, "name")) << '='
               << cell_text(at(d, "value")) << " (needs level " << cell_text(at(d, "needs_level"))
               << ")\n";
    }
    if (!cell_text(at(p, "last_error")).empty() && at(p, "last_error").is_string())
      detail << "    last error: " << cell_text(at(p, "last_error")) << '\n';
    if (!detail.str().empty()) out << '\n' << cell_text(at(p, "process")) << ":\n" << detail.str();
  }
  return out.str();
}

std::string format_divergences(const json& divergences) {
  const json& differences = at(divergences, "differences");
  if (!differences.is_array() || differences.empty())
    return "no divergence: every worker runs as its host does\n";
  std::ostringstream out;
  std::size_t counted = 0;
  for (const auto& d : differences) {
    const bool divergence = at(d, "severity") == "divergence";
    const bool acknowledged = at(d, "acknowledged") == true;
    if (divergence && !acknowledged) ++counted;
    const std::string kind = cell_text(at(d, "kind"));
    const std::string field = cell_text(at(d, "field"));
    out << cell_text(at(d, "process")) << ": " << (divergence ? "DIVERGES" : "note") << " in "
        << kind << (field == kind ? "" : " " + field)
        << (acknowledged && divergence ? " (acknowledged: ORCH_DIVERGENCE_ACK)" : "") << '\n'
        << "  host:   " << cell_text(at(d, "host")) << "\n  worker: " << cell_text(at(d, "worker"))
        << "\n  why:    " << cell_text(at(d, "explanation"))
        << "\n  fix:    " << cell_text(at(d, "fix")) << "\n\n";
  }
  out << counted << " unacknowledged divergence" << (counted == 1 ? "" : "s") << '\n';
  return out.str();
}

}  // namespace orch::live
