// The live tools' documents and their checks (docs/cli.md): the Prometheus text, the status
// table, the HTML report and --since durations.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "orch/live/live_text.hpp"
#include "orch/live/live_views.hpp"
#include "orch/live/metrics_text.hpp"
#include "orch/live/report_html.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

TEST(metrics_text, every_family_has_help_and_type_and_label_values_are_escaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  metrics_inputs in;
  in.status = {{"budget_bytes", 1024},
               {"processes",
                {{{"process", "host"}, {"mode", "host"}, {"pager_resident_bytes", 10}},
                 {{"process", "we\"ird"}, {"mode", "worker"}, {"calls", 3}}}}};
  in.divergences = {
      {"differences",
       {{{"process", "we\"ird"}, {"severity", "divergence"}, {"acknowledged", false}}}}};
  in.call_durations["we\"ird"].observe(0.002);
  in.evictions["we\"ird"] = 2;
  const std::string text = prometheus_metrics(in);
  EXPECT_NE(text.find("comfy_orch_pager_resident_bytes{process=\"host\"} 10\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("comfy_orch_calls_total{process=\"we\\\"ird\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("comfy_orch_divergences{process=\"we\\\"ird\"} 1\n"), std::string::npos);
  EXPECT_NE(
      text.find("comfy_orch_node_call_duration_seconds_bucket{env=\"we\\\"ird\",le=\"0.001\"} 0\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "comfy_orch_node_call_duration_seconds_bucket{env=\"we\\\"ird\",le=\"0.0025\"} 1\n"),
      std::string::npos);
  EXPECT_NE(text.find("le=\"+Inf\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("comfy_orch_evictions_total{process=\"we\\\"ird\"} 2\n"), std::string::npos);
  // Every sample's family was introduced by its TYPE line first.
  std::set<std::string> typed;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      typed.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line[0] != '#') {
      std::string family = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (family.size() > s.size() &&
            family.compare(family.size() - s.size(), s.size(), s) == 0 &&
            typed.count(family.substr(0, family.size() - s.size())) != 0)
          family = family.substr(0, family.size() - s.size());
      }
      EXPECT_EQ(typed.count(family), 1u) << line;
    }
  }
}

TEST(live_text, the_status_table_has_a_row_per_process_and_survives_odd_documents) {
  const json status = {
      {"budget_bytes", 3u << 30},
      {"processes",
       {{{"process", "host"}, {"mode", "host"}, {"manager", "pager"}, {"state", "ready"}},
        {{"process", "env-a"},
         {"mode", "in-process"},
         {"mode_reason", "isolation disabled"},
         {"plugins", {{{"slot", "pager"}, {"name", "p"}, {"version", "1"}, {"level", 2}}}},
         {"settings_match", false}}}}};
  const std::string text = format_status(status);
  EXPECT_NE(text.find("pinned budget 3.0G"), std::string::npos) << text;
  EXPECT_NE(text.find("\nhost "), std::string::npos) << text;
  EXPECT_NE(text.find("SETTINGS MISMATCH"), std::string::npos);
  EXPECT_NE(text.find("in-process: isolation disabled"), std::string::npos);
  EXPECT_NE(text.find("pager=p 1 (L2)"), std::string::npos);
  EXPECT_NO_THROW(format_status(json()));
  EXPECT_NO_THROW(format_status({{"processes", {1, "x", nullptr}}}));
  EXPECT_EQ(human_bytes(json(1536)), "1.5K");
  EXPECT_EQ(human_bytes(json("x")), "-");
}

TEST(report_html, text_from_the_server_is_escaped_and_nothing_is_fetched) {
  const json status = {
      {"pid", 1}, {"processes", {{{"process", "<script>alert(1)</script>"}, {"mode", "worker"}}}}};
  const json timeline = {
      {"period_ms", "<b>"},
      {"samples",
       {{{"unix_ms", 1000},
         {"processes", {{"<script>alert(1)</script>", {{"pager_resident_bytes", 5}}}}}},
        {{"unix_ms", 2000},
         {"processes", {{"<script>alert(1)</script>", {{"pager_resident_bytes", 9}}}}}}}},
      {"markers",
       {{{"unix_ms", 1500},
         {"process", "<script>alert(1)</script>"},
         {"kind", "x\" onload=\"y"},
         {"text", "<img src=x>"}}}}};
  const json divergences = {{"differences", {{{"process", "'\"<>&"}, {"severity", "divergence"}}}}};
  const std::string html = render_report_html(status, divergences, timeline);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("\" onload"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_NO_THROW(render_report_html(json(), json::array(), json("x")));
  EXPECT_NO_THROW(
      render_report_html({{"processes", {1, nullptr}}}, {{"differences", {1}}},
                         {{"samples", {1, {{"processes", 3}}}}, {"markers", {nullptr}}}));
}

TEST(parse_since, takes_ms_s_m_h_and_refuses_the_rest) {
  EXPECT_EQ(parse_since("10m")->count(), 600000);
  EXPECT_EQ(parse_since("90")->count(), 90000);
  EXPECT_EQ(parse_since("2h")->count(), 7200000);
  EXPECT_EQ(parse_since("500ms")->count(), 500);
  for (const char* bad : {"", "m", "10d", "-5m", "1e9", "99999999999999999999s"})
    EXPECT_FALSE(parse_since(bad).ok()) << bad;
}

}  // namespace
}  // namespace orch::live
