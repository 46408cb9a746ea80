// The host report (host_report.hpp): what a serve host says at GET /orch/fleet/host, read by the
// gateway as untrusted input, and the sentence naming how its fingerprint differs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "orch/fleet/host_report.hpp"

namespace orch::fleet {
namespace {

using nlohmann::json;

const std::string hash_a = "sha256:" + std::string(64, 'a');
const std::string hash_b = "sha256:" + std::string(64, 'b');

json good_report() {
  return {{"name", "host-1"},
          {"fingerprint", hash_a},
          {"fingerprint_parts", {{"comfy-orch", "0.4.0"}, {"deployment", hash_b}}},
          {"node_classes", {"KSampler", "SaveImage"}},
          {"resident_models", {"checkpoints/sd15.safetensors"}},
          {"free_device_bytes", 1024},
          {"running", true},
          {"queued", 2}};
}

std::string error_of(const json& report) {
  const auto r = parse_host_report(report.dump());
  EXPECT_FALSE(r.report) << report.dump();
  return r.error;
}

TEST(host_report, a_good_report_fills_the_host_view) {
  const auto r = parse_host_report(good_report().dump());
  ASSERT_TRUE(r.report) << r.error;
  const host_view& v = r.report->view;
  EXPECT_EQ(v.name, "host-1");
  EXPECT_TRUE(v.up);
  EXPECT_EQ(v.fingerprint, hash_a);
  EXPECT_EQ(v.node_classes, (std::set<std::string>{"KSampler", "SaveImage"}));
  EXPECT_EQ(v.resident_models, (std::set<std::string>{"checkpoints/sd15.safetensors"}));
  EXPECT_EQ(v.free_device_bytes, 1024u);
  EXPECT_TRUE(v.running);
  EXPECT_EQ(v.queued, 2u);
  EXPECT_EQ(v.last_used, 0u);
  EXPECT_EQ(r.report->parts, (fingerprint_parts{{"comfy-orch", "0.4.0"}, {"deployment", hash_b}}));
}

TEST(host_report, what_the_host_writes_the_gateway_reads_back) {
  const auto first = parse_host_report(good_report().dump());
  ASSERT_TRUE(first.report);
  EXPECT_EQ(host_report_json(*first.report), good_report());
}

TEST(host_report, fields_it_does_not_know_are_ignored) {
  json report = good_report();
  report["gpu"] = {{"name", "H100"}};
  EXPECT_TRUE(parse_host_report(report.dump()).report);
}

TEST(host_report, each_field_wrong_in_turn_is_named) {
  const struct {
    const char* field;
    json value;
    std::string error;
  } cases[] = {
      {"name", 7, "host report: name: not a string"},
      {"name", "", "host report: name: empty"},
      {"name", std::string(1025, 'n'), "host report: name: 1025 bytes, more than 1024"},
      {"fingerprint", 7, "host report: fingerprint: not \"sha256:\" and 64 lower-case hex digits"},
      {"fingerprint", "sha256:abc",
       "host report: fingerprint: not \"sha256:\" and 64 lower-case hex digits"},
      {"fingerprint", "sha256:" + std::string(64, 'A'),
       "host report: fingerprint: not \"sha256:\" and 64 lower-case hex digits"},
      {"fingerprint_parts", json::array(), "host report: fingerprint_parts: not an object"},
      {"fingerprint_parts", {{"env:a", 1}}, "host report: fingerprint_parts[env:a]: not a string"},
      {"fingerprint_parts",
       {{"", "x"}},
       "host report: fingerprint_parts[]: a part's name must be 1 to 1024 bytes"},
      {"node_classes", "KSampler", "host report: node_classes: not an array"},
      {"node_classes", {"A", 3}, "host report: node_classes[1]: not a string"},
      {"node_classes", {""}, "host report: node_classes[0]: empty"},
      {"resident_models", json::array({json::object()}),
       "host report: resident_models[0]: not a string"},
      {"resident_models", nullptr, "host report: resident_models: not an array"},
      {"free_device_bytes", -1, "host report: free_device_bytes: not an unsigned integer"},
      {"free_device_bytes", 1.5, "host report: free_device_bytes: not an unsigned integer"},
      {"free_device_bytes", "1", "host report: free_device_bytes: not an unsigned integer"},
      {"running", 1, "host report: running: not a boolean"},
      {"queued", -3, "host report: queued: not an unsigned integer"},
  };
  for (const auto& c : cases) {
    json report = good_report();
    report[c.field] = c.value;
    EXPECT_EQ(error_of(report), c.error) << c.field << " = " << c.value.dump();
  }
  for (const char* field : {"name", "fingerprint", "fingerprint_parts", "node_classes",
                            "resident_models", "free_device_bytes", "running", "queued"}) {
    json report = good_report();
    report.erase(field);
    EXPECT_EQ(error_of(report), std::string("host report: ") + field + ": missing");
  }
}

TEST(host_report, what_is_not_a_report_object_is_refused) {
  EXPECT_EQ(parse_host_report("").error, "host report: not JSON");
  EXPECT_EQ(parse_host_report("{\"name\":").error, "host report: not JSON");
  EXPECT_EQ(parse_host_report("[1,2]").error, "host report: not an object");
  EXPECT_EQ(parse_host_report(std::string(100'000, '[')).error,
            "host report: nested more than 8 deep");
}

TEST(host_report, more_names_than_the_bound_are_refused) {
  json report = good_report();
  report["node_classes"] = json::array();
  for (int i = 0; i < 100'001; ++i) report["node_classes"].push_back("C" + std::to_string(i));
  EXPECT_EQ(error_of(report), "host report: node_classes: 100001 entries, more than 100000");
  report["node_classes"].erase(report["node_classes"].size() - 1);
  EXPECT_TRUE(parse_host_report(report.dump()).report);

  json models = good_report();
  models["resident_models"] = json::array();
  for (int i = 0; i < 100'001; ++i) models["resident_models"].push_back("m" + std::to_string(i));
  EXPECT_EQ(error_of(models), "host report: resident_models: 100001 entries, more than 100000");
}

TEST(host_report, a_report_larger_than_the_bound_is_refused_before_it_is_parsed) {
  report_limits limits;
  limits.max_bytes = 1000;
  const std::string text = good_report().dump() + std::string(1000, ' ');
  EXPECT_EQ(parse_host_report(text, limits).error,
            "host report: " + std::to_string(text.size()) + " bytes, more than 1000");
}

TEST(host_report, garbage_never_crashes_and_always_says_why) {
  // Random bytes, and the good report with bytes flipped, cut or repeated: every answer is a
  // report or an error, never an exception or a crash.
  std::mt19937_64 rng(58);
  const std::string good = good_report().dump();
  const std::string alphabet = "{}[]\":,\\0123456789-.eEtruefalsnl ";
  for (int round = 0; round < 20'000; ++round) {
    std::string text;
    switch (round % 4) {
      case 0:
        for (std::size_t i = rng() % 200; i > 0; --i) text.push_back(static_cast<char>(rng()));
        break;
      case 1:
        for (std::size_t i = rng() % 200; i > 0; --i)
          text.push_back(alphabet[rng() % alphabet.size()]);
        break;
      case 2:
        text = good;
        for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
          text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
        break;
      default:
        text = good.substr(0, rng() % good.size());
        break;
    }
    host_report_reading r;
    ASSERT_NO_THROW(r = parse_host_report(text)) << text;
    EXPECT_NE(r.report.has_value(), !r.error.empty()) << text;
  }
}

TEST(host_report, the_difference_names_each_part_that_differs_then_those_the_same) {
  const fingerprint_parts fleet = {
      {"comfy-orch", "0.4.0"},
      {"deployment", hash_a},
      {"env:imageops-nodes", "sha256:cd34ef56" + std::string(56, '0')}};
  fingerprint_parts host = fleet;
  host["env:imageops-nodes"] = "sha256:ab12cd34" + std::string(56, '0');
  EXPECT_EQ(fingerprint_difference(fleet, host),
            "env imageops-nodes: sha256:ab12cd340000\u2026 here, sha256:cd34ef560000\u2026 in the "
            "fleet; comfy-orch: same; deployment: same");
}

TEST(host_report, a_part_only_one_side_has_is_absent_on_the_other) {
  const fingerprint_parts fleet = {{"deployment", hash_a}, {"env:sam3", hash_b}};
  const fingerprint_parts host = {{"deployment", hash_a}, {"env:moge", hash_b}};
  EXPECT_EQ(fingerprint_difference(fleet, host),
            "env moge: sha256:bbbbbbbbbbbb\u2026 here, absent in the fleet; env sam3: absent "
            "here, sha256:bbbbbbbbbbbb\u2026 in the fleet; deployment: same");
}

TEST(host_report, versions_are_shown_whole_and_equal_parts_say_so) {
  EXPECT_EQ(fingerprint_difference({{"comfy-orch", "0.4.0"}}, {{"comfy-orch", "0.5.0"}}),
            "comfy-orch: 0.5.0 here, 0.4.0 in the fleet");
  EXPECT_EQ(fingerprint_difference({{"deployment", hash_a}}, {{"deployment", hash_a}}),
            "no part differs; deployment: same");
}

TEST(host_report, many_equal_parts_are_counted_and_untrusted_bytes_are_not_printed) {
  fingerprint_parts fleet, host;
  for (int i = 0; i < 9; ++i) fleet["env:e" + std::to_string(i)] = hash_a;
  host = fleet;
  fleet["env:x"] = "v1";
  host["env:x"] = "v\n\x1b[2J";
  EXPECT_EQ(fingerprint_difference(fleet, host),
            "env x: v??[2J here, v1 in the fleet; 9 other parts same");
}

}  // namespace
}  // namespace orch::fleet
