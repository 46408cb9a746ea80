#include "orch/live/report_html.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <vector>

#include "orch/live/live_text.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

constexpr int chart_width = 960;
constexpr int plot_left = 70;
constexpr int plot_right = 20;

struct series {
  const char* key;
  const char* label;
  const char* colour;
};
constexpr series held_series[] = {{"pager_resident_bytes", "pager resident", "#1f77b4"},
                                  {"pinned_reserved_bytes", "pinned reserved", "#ff7f0e"},
                                  {"cast_buffer_bytes", "cast buffers", "#2ca02c"}};
constexpr series free_series[] = {{"device_free_bytes", "device free (its view)", "#9467bd"}};

const char* marker_colour(const std::string& kind) {
  if (kind == "divergence") return "#d62728";
  if (kind == "restart" || kind == "state") return "#8c564b";
  if (kind == "eviction") return "#e377c2";
  if (kind == "free") return "#17becf";
  if (kind == "epoch") return "#7f7f7f";
  return "#bcbd22";  // boundary
}

std::string svg_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

std::string clock_time(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%H:%M:%S", &tm);
  return text;
}

// A sample's figures of `process` (an empty object when it has none).
const json& figures_at(const json& sample, const std::string& process) {
  static const json none = json::object();
  if (!sample.is_object()) return none;
  const auto all = sample.find("processes");
  if (all == sample.end() || !all->is_object()) return none;
  const auto it = all->find(process);
  return it == all->end() || !it->is_object() ? none : *it;
}

std::int64_t unix_ms_of(const json& j) {
  const auto it = j.is_object() ? j.find("unix_ms") : j.end();
  return j.is_object() && it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

struct time_range {
  std::int64_t from = 0;
  std::int64_t to = 1;
  double x(std::int64_t t) const {
    const double span = static_cast<double>(std::max<std::int64_t>(to - from, 1));
    return plot_left +
           (chart_width - plot_left - plot_right) * static_cast<double>(t - from) / span;
  }
};

// One chart of `lines` for `process`, with the markers of that process as vertical lines.
template <std::size_t N>
void chart(std::ostringstream& out, const json& samples, const std::vector<const json*>& markers,
           const std::string& process, const series (&lines)[N], const time_range& range,
           const std::string& title) {
  constexpr int height = 170, top = 22, bottom = 24;
  std::uint64_t peak = 1;
  for (const auto& s : samples) {
    for (const auto& l : lines)
      peak = std::max(peak, unsigned_field(figures_at(s, process), l.key));
  }
  auto y = [&](std::uint64_t v) {
    return top +
           (height - top - bottom) * (1.0 - static_cast<double>(v) / static_cast<double>(peak));
  };
  out << "<svg class=\"timeline\" width=\"" << chart_width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << chart_width << ' ' << height << "\" role=\"img\" aria-label=\""
      << html_escape(title) << "\">\n"
      << "<text x=\"" << plot_left << "\" y=\"15\" class=\"title\">" << html_escape(title)
      << "</text>\n"
      << "<rect x=\"" << plot_left << "\" y=\"" << top << "\" width=\""
      << chart_width - plot_left - plot_right << "\" height=\"" << height - top - bottom
      << "\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n"
      << "<text x=\"" << plot_left - 4 << "\" y=\"" << top + 10 << "\" text-anchor=\"end\">"
      << human_bytes(json(peak)) << "</text>\n"
      << "<text x=\"" << plot_left - 4 << "\" y=\"" << height - bottom
      << "\" text-anchor=\"end\">0</text>\n"
      << "<text x=\"" << plot_left << "\" y=\"" << height - 6 << "\">" << clock_time(range.from)
      << " UTC</text>\n"
      << "<text x=\"" << chart_width - plot_right << "\" y=\"" << height - 6
      << "\" text-anchor=\"end\">" << clock_time(range.to) << " UTC</text>\n";
  for (const json* m : markers) {
    const double x = range.x(unix_ms_of(*m));
    const std::string kind = text_field(*m, "kind");
    out << "<line class=\"marker marker-" << html_escape(kind) << "\" x1=\"" << svg_number(x)
        << "\" x2=\"" << svg_number(x) << "\" y1=\"" << top << "\" y2=\"" << height - bottom
        << "\" stroke=\"" << marker_colour(kind) << "\" stroke-dasharray=\"3,2\"><title>"
        << html_escape(kind + " " + clock_time(unix_ms_of(*m)) + ": " + text_field(*m, "text"))
        << "</title></line>\n";
  }
  for (const auto& l : lines) {
    out << "<polyline class=\"series\" fill=\"none\" stroke-width=\"2\" stroke=\"" << l.colour
        << "\" points=\"";
    for (const auto& s : samples) {
      const json& figures = figures_at(s, process);
      if (figures.empty()) continue;
      out << svg_number(range.x(unix_ms_of(s))) << ','
          << svg_number(y(unsigned_field(figures, l.key))) << ' ';
    }
    out << "\"><title>" << l.label << "</title></polyline>\n";
  }
  out << "</svg>\n<div class=\"legend\">";
  for (const auto& l : lines)
    out << "<span><i style=\"background:" << l.colour << "\"></i>" << l.label << "</span>";
  out << "</div>\n";
}

void summary(std::ostringstream& out, const json& status) {
  out << "<table><tr><th>process</th><th>mode</th><th>manager</th><th>level</th><th>device</th>"
         "<th>view</th><th>resident</th><th>pinned</th><th>cast (high / bound)</th><th>calls</th>"
         "<th>generation</th><th>restarts</th><th>state</th></tr>\n";
  if (status.is_object() && status.contains("processes") && status["processes"].is_array()) {
    for (const auto& p : status["processes"]) {
      if (!p.is_object()) continue;
      auto cell = [&](const char* key) {
        const json& v = p.contains(key) ? p[key] : json();
        return html_escape(v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump());
      };
      out << "<tr><td>" << cell("process") << "</td><td>" << cell("mode") << "</td><td>"
          << cell("manager") << "</td><td>" << cell("level") << "</td><td>" << cell("device")
          << "</td><td>" << cell("free_view") << "</td><td>"
          << human_bytes(json(unsigned_field(p, "pager_resident_bytes") +
                              unsigned_field(p, "ledger_loaded_bytes")))
          << "</td><td>" << human_bytes(p.value("pinned_reserved_bytes", json())) << "</td><td>"
          << human_bytes(p.value("cast_buffer_bytes", json())) << " ("
          << human_bytes(p.value("cast_high_water_bytes", json())) << " / "
          << human_bytes(p.value("cast_bound_bytes", json())) << ")</td><td>" << cell("calls")
          << "</td><td>" << cell("generation") << "</td><td>" << cell("restarts") << "</td><td>"
          << cell("state") << "</td></tr>\n";
    }
  }
  out << "</table>\n";
}

void divergence_table(std::ostringstream& out, const json& divergences) {
  const json& differences = divergences.is_object() && divergences.contains("differences")
                                ? divergences["differences"]
                                : json::array();
  out << "<h2 id=\"divergences\">Divergences</h2>\n";
  if (!differences.is_array() || differences.empty()) {
    out << "<p class=\"ok\">No divergence: every worker runs as its host does.</p>\n";
    return;
  }
  out << "<table class=\"divergences\"><tr><th>process</th><th>what</th><th>host</th>"
         "<th>worker</th><th>severity</th><th>why</th><th>fix</th></tr>\n";
  for (const auto& d : differences) {
    if (!d.is_object()) continue;
    auto cell = [&](const char* key) {
      const json& v = d.contains(key) ? d[key] : json();
      return html_escape(v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump());
    };
    const bool acknowledged = d.contains("acknowledged") && d["acknowledged"] == true;
    const bool counts = text_field(d, "severity") == "divergence" && !acknowledged;
    out << "<tr class=\"" << (counts ? "diverges" : "note") << "\"><td>" << cell("process")
        << "</td><td>" << cell("kind") << ' ' << cell("field") << "</td><td>" << cell("host")
        << "</td><td>" << cell("worker") << "</td><td>" << cell("severity")
        << (acknowledged ? " (acknowledged)" : "") << "</td><td>" << cell("explanation")
        << "</td><td>" << cell("fix") << "</td></tr>\n";
  }
  out << "</table>\n";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_report_html(const json& status, const json& divergences, const json& timeline) {
  const json& samples =
      timeline.is_object() && timeline.contains("samples") && timeline["samples"].is_array()
          ? timeline["samples"]
          : json::array();
  const json& markers =
      timeline.is_object() && timeline.contains("markers") && timeline["markers"].is_array()
          ? timeline["markers"]
          : json::array();
  time_range range;
  if (!samples.empty()) {
    range.from = unix_ms_of(samples.front());
    range.to = unix_ms_of(samples.back());
  }
  // The status document's order (the host first), then any process only the samples know.
  std::vector<std::string> processes;
  std::vector<std::string> in_process;
  if (status.is_object() && status.contains("processes") && status["processes"].is_array()) {
    for (const auto& p : status["processes"]) {
      if (!p.is_object()) continue;
      (text_field(p, "mode") == "in-process" ? in_process : processes)
          .push_back(text_field(p, "process"));
    }
  }
  for (const auto& s : samples) {
    if (!s.is_object() || !s.contains("processes") || !s["processes"].is_object()) continue;
    for (const auto& [name, figures] : s["processes"].items()) {
      if (std::find(processes.begin(), processes.end(), name) == processes.end() &&
          std::find(in_process.begin(), in_process.end(), name) == in_process.end())
        processes.push_back(name);
    }
  }
  std::ostringstream out;
  const json no_status = json::object();
  const json& st = status.is_object() ? status : no_status;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<title>comfy-orch memory report</title>\n<style>\n"
         "body{font:13px sans-serif;margin:20px;color:#222}h1{font-size:20px}h2{font-size:16px}"
         "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;"
         "text-align:left;vertical-align:top}tr.diverges td{background:#fde0e0}"
         "svg text{font:11px sans-serif;fill:#444}svg text.title{font-weight:bold}"
         ".legend span{margin-right:14px}.legend i{display:inline-block;width:12px;height:3px;"
         "margin-right:4px;vertical-align:middle}.ok{color:#2a7}\n</style></head><body>\n"
         "<h1>comfy-orch memory report</h1>\n<p>serve pid "
      << html_escape(st.value("pid", json()).dump()) << ", pinned budget "
      << human_bytes(st.value("budget_bytes", json())) << ", " << samples.size()
      << " samples every "
      << html_escape(timeline.is_object() ? timeline.value("period_ms", json()).dump() : "?")
      << " ms from " << clock_time(range.from) << " to " << clock_time(range.to) << " UTC, "
      << markers.size() << " markers.</p>\n";
  summary(out, st);
  for (const auto& process : processes) {
    std::vector<const json*> own;
    for (const auto& m : markers)
      if (m.is_object() && text_field(m, "process") == process) own.push_back(&m);
    out << "<h2>" << html_escape(process) << "</h2>\n";
    chart(out, samples, own, process, held_series, range, process + ": memory held");
    chart(out, samples, own, process, free_series, range, process + ": device free view");
    if (!own.empty()) {
      out << "<details><summary>" << own.size() << " markers</summary><table>";
      for (const json* m : own)
        out << "<tr><td>" << clock_time(unix_ms_of(*m)) << "</td><td>"
            << html_escape(text_field(*m, "kind")) << "</td><td>"
            << html_escape(text_field(*m, "text")) << "</td></tr>";
      out << "</table></details>\n";
    }
  }
  for (const auto& process : in_process)
    out << "<h2>" << html_escape(process) << "</h2>\n<p>Runs in no worker of its own "
        << "(in-process: see the table above); it has no timeline.</p>\n";
  divergence_table(out, divergences);
  out << "</body></html>\n";
  return out.str();
}

}  // namespace orch::live
