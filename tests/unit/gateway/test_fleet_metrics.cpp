// Every host's /metrics as one exposition at the gateway (fleet_metrics.hpp): each sample gains
// its host's label, a family's HELP and TYPE are written once and its samples together, and a
// host's text is untrusted: what is not in the format is dropped and counted, never copied.
#include <gtest/gtest.h>

#include <algorithm>

#include "orch/gateway/fleet_metrics.hpp"

namespace orch::gateway {
namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string serve_text =
    "# HELP comfy_orch_calls_total Calls\n"
    "# TYPE comfy_orch_calls_total counter\n"
    "comfy_orch_calls_total{process=\"host\"} 3\n"
    "comfy_orch_calls_total{process=\"env\\\"q\\\\\"} 4\n"
    "# HELP comfy_orch_node_call_duration_seconds Durations\n"
    "# TYPE comfy_orch_node_call_duration_seconds histogram\n"
    "comfy_orch_node_call_duration_seconds_bucket{env=\"e\",le=\"0.1\"} 1\n"
    "comfy_orch_node_call_duration_seconds_bucket{env=\"e\",le=\"+Inf\"} 2\n"
    "comfy_orch_node_call_duration_seconds_sum{env=\"e\"} 0.5\n"
    "comfy_orch_node_call_duration_seconds_count{env=\"e\"} 2\n"
    "# TYPE comfy_orch_budget_bytes gauge\n"
    "comfy_orch_budget_bytes 1.5e+09\n";

TEST(fleet_metrics, samples_gain_the_host_label_and_each_family_is_written_once_and_together) {
  const auto m = merge_host_metrics({{"host-0", serve_text}, {"host-1", serve_text}});
  EXPECT_EQ(count_of(m.text, "# TYPE comfy_orch_calls_total counter\n"), 1u) << m.text;
  EXPECT_EQ(count_of(m.text, "# HELP comfy_orch_node_call_duration_seconds Durations\n"), 1u);
  EXPECT_NE(m.text.find("comfy_orch_calls_total{host=\"host-0\",process=\"host\"} 3\n"
                        "comfy_orch_calls_total{host=\"host-0\",process=\"env\\\"q\\\\\"} 4\n"
                        "comfy_orch_calls_total{host=\"host-1\",process=\"host\"} 3\n"),
            std::string::npos)
      << m.text;
  // The histogram's series stay in its family, after its TYPE, before the next family.
  const auto type = m.text.find("# TYPE comfy_orch_node_call_duration_seconds histogram");
  const auto count = m.text.find("comfy_orch_node_call_duration_seconds_count{host=\"host-1\"");
  const auto budget = m.text.find("comfy_orch_budget_bytes{host=\"host-0\"} 1.5e+09");
  ASSERT_NE(type, std::string::npos);
  ASSERT_NE(count, std::string::npos);
  ASSERT_NE(budget, std::string::npos);
  EXPECT_LT(type, count);
  EXPECT_LT(count, budget);
  EXPECT_EQ(m.dropped_lines.at("host-0"), 0u);
  EXPECT_EQ(m.dropped_lines.at("host-1"), 0u);
}

TEST(fleet_metrics, what_is_not_in_the_format_is_dropped_and_counted) {
  const std::string hostile =
      "comfy_orch_calls_total{process=\"x\"} 1\n"
      "comfy_orch_calls_total{process=\"x\"} 0x10\n"               // hexadecimal
      "comfy_orch_calls_total{process=\"x} 1\n"                    // no closing quote
      "comfy_orch_calls_total{process=\"x\",host=\"host-0\"} 1\n"  // its own host label
      "comfy_orch_calls_total{process=\"\\x\"} 1\n"                // an unknown escape
      "comfy_orch_calls_total{9=\"x\"} 1\n"                        // a label name
      "comfy_orch_calls_total 1 2 3\n"                             // too many fields
      "comfy_orch_calls_total 1 12a\n"                             // a timestamp
      "bad-name 1\n"
      "comfy_orch_gateway_hosts_up 99\n"       // the gateway's own
      "# TYPE comfy_orch_calls_total gauge\n"  // another type
      "# TYPE odd nonsense\n"
      "# HELP h \x1b]0;title\x07\n"                    // control characters
      "ok_metric{a=\"\xff\x1b\"} NaN 1700000000000\n"  // re-escaped, kept
      + std::string(70 * 1024, 'x') + " 1\n";          // past the line cap
  const auto m = merge_host_metrics({{"host-0", serve_text}, {"host-1", hostile}});
  // host-1's one good sample of the counter family stays; its gauge TYPE is ignored (the first
  // type a family is declared wins within a host; across hosts, another type drops the samples).
  EXPECT_NE(m.text.find("comfy_orch_calls_total{host=\"host-1\",process=\"x\"} 1\n"),
            std::string::npos)
      << m.text;
  EXPECT_EQ(count_of(m.text, "host=\"host-1\""), 2u) << m.text;
  EXPECT_EQ(m.text.find("0x10"), std::string::npos);
  EXPECT_EQ(m.text.find("comfy_orch_gateway_"), std::string::npos);
  EXPECT_EQ(m.text.find('\x1b'), std::string::npos) << "a control character was copied";
  EXPECT_EQ(m.dropped_lines.at("host-1"), 13u) << m.text;
  EXPECT_EQ(m.dropped_lines.at("host-0"), 0u);
}

TEST(fleet_metrics, a_family_another_host_typed_otherwise_is_dropped_from_that_host) {
  const auto m = merge_host_metrics(
      {{"host-0", serve_text},
       {"host-1", "# TYPE comfy_orch_budget_bytes counter\ncomfy_orch_budget_bytes 5\n"}});
  EXPECT_EQ(m.text.find("comfy_orch_budget_bytes{host=\"host-1\"}"), std::string::npos) << m.text;
  EXPECT_EQ(m.dropped_lines.at("host-1"), 1u);
}

TEST(fleet_metrics, a_host_past_the_sample_cap_has_the_rest_dropped) {
  std::string many;
  for (int i = 0; i < 200010; ++i) many += "m{i=\"" + std::to_string(i) + "\"} 1\n";
  const auto m = merge_host_metrics({{"host-0", many}});
  EXPECT_EQ(count_of(m.text, "\n"), 200000u);
  EXPECT_EQ(m.dropped_lines.at("host-0"), 10u);
}

}  // namespace
}  // namespace orch::gateway
