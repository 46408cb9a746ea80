// divergence_check (docs/cli.md, "diverge"): each rule over a status document built by hand, as
// a live server's process_status would give it.
#include <gtest/gtest.h>

#include "orch/live/divergence_check.hpp"
#include "orch/live/live_text.hpp"

namespace {

using nlohmann::json;
using orch::live::find_divergences;

json host_entry() {
  return {
      {"process", "host"},
      {"mode", "host"},
      {"state", "ready"},
      {"manager", "pager"},
      {"manager_reason", "device is sim"},
      {"level", 4},
      {"plugins", {{{"slot", "pager"}, {"name", "sim-pager"}, {"version", "1.0"}, {"level", 4}}}},
      {"free_view", "device"},
      {"memory_view", {{"budget_bytes", 1000}, {"cgroup_limit_bytes", nullptr}}}};
}

// A worker that runs exactly as the host does.
json worker_entry() {
  return {
      {"process", "env-a"},
      {"mode", "worker"},
      {"state", "ready"},
      {"manager", "pager"},
      {"manager_reason", "parent signal"},
      {"level", 4},
      {"plugins", {{{"slot", "pager"}, {"name", "sim-pager"}, {"version", "1.0"}, {"level", 4}}}},
      {"dropped_settings", json::array()},
      {"free_view", "device"},
      {"applied_settings", {{"streams", "2"}, {"level", "4"}}},
      {"expected_settings", {{"streams", "2"}, {"level", "4"}}},
      {"settings_match", true},
      {"memory_view",
       {{"budget_bytes", 1000}, {"cgroup_limit_bytes", nullptr}, {"own_budget_bytes", 1000}}},
      {"cast_high_water_bytes", 64},
      {"cast_bound_bytes", 64},
      {"models", json::array()},
      {"divergence_acknowledged", false}};
}

json status_of(const json& worker) {
  return {{"budget_bytes", 1000}, {"processes", {host_entry(), worker}}};
}

json only(const json& found, const std::string& kind) {
  json out = json::array();
  for (const auto& d : found["differences"])
    if (d["kind"] == kind) out.push_back(d);
  return out;
}

TEST(divergence_check, a_worker_that_runs_as_its_host_does_has_no_difference) {
  const json found = find_divergences(status_of(worker_entry()));
  EXPECT_FALSE(found["divergent"].get<bool>());
  EXPECT_TRUE(found["differences"].empty()) << found.dump(2);
  EXPECT_NE(orch::live::format_divergences(found).find("no divergence"), std::string::npos);
}

TEST(divergence_check, another_manager_names_both_reasons_and_the_acknowledgement) {
  json w = worker_entry();
  w["manager"] = "ledger";
  w["manager_reason"] = "no pager plugin for backend sim";
  const json found = find_divergences(status_of(w));
  EXPECT_TRUE(found["divergent"].get<bool>());
  const json d = only(found, "manager");
  ASSERT_EQ(d.size(), 1u) << found.dump(2);
  EXPECT_EQ(d[0]["host"], "pager");
  EXPECT_EQ(d[0]["worker"], "ledger");
  const std::string why = d[0]["explanation"];
  EXPECT_NE(why.find("no pager plugin for backend sim"), std::string::npos) << why;
  EXPECT_NE(why.find("device is sim"), std::string::npos) << why;
  EXPECT_NE(d[0]["fix"].get<std::string>().find("ORCH_DIVERGENCE_ACK"), std::string::npos);

  w["divergence_acknowledged"] = true;
  const json acked = find_divergences(status_of(w));
  EXPECT_FALSE(acked["divergent"].get<bool>()) << "an acknowledged divergence does not count";
  EXPECT_TRUE(only(acked, "manager")[0]["acknowledged"].get<bool>());
}

TEST(divergence_check, settings_differ_field_by_field_with_both_values) {
  json w = worker_entry();
  w["applied_settings"] = {{"streams", "1"}, {"level", "4"}, {"extra", "x"}};
  w["settings_match"] = false;
  const json d = only(find_divergences(status_of(w)), "setting");
  ASSERT_EQ(d.size(), 2u) << d.dump(2);
  EXPECT_EQ(d[0]["field"], "extra");
  EXPECT_EQ(d[0]["host"], nullptr);
  EXPECT_EQ(d[1]["field"], "streams");
  EXPECT_EQ(d[1]["host"], "2");
  EXPECT_EQ(d[1]["worker"], "1");
  EXPECT_NE(d[1]["explanation"].get<std::string>().find("streams=2"), std::string::npos);
}

TEST(divergence_check, a_hash_mismatch_over_equal_fields_is_still_said) {
  json w = worker_entry();
  w["settings_match"] = false;
  const json d = only(find_divergences(status_of(w)), "setting");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["field"], "settings_hash");
}

TEST(divergence_check, a_hash_mismatch_from_a_worker_that_reported_no_fields_is_said) {
  json w = worker_entry();
  w["applied_settings"] = json::object();
  w["settings_match"] = false;
  const json d = only(find_divergences(status_of(w)), "setting");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["field"], "settings_hash");
}

TEST(divergence_check, a_lower_level_and_dropped_settings_each_get_their_fix) {
  json w = worker_entry();
  w["level"] = 2;
  w["dropped_settings"] = {{{"name", "simple_headroom"}, {"value", "512MiB"}, {"needs_level", 4}}};
  const json found = find_divergences(status_of(w));
  const json level = only(found, "plugin");
  ASSERT_EQ(level.size(), 1u) << found.dump(2);
  EXPECT_EQ(level[0]["field"], "level");
  EXPECT_NE(level[0]["fix"].get<std::string>().find("level 4"), std::string::npos);
  const json dropped = only(found, "dropped_setting");
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]["field"], "simple_headroom");
  EXPECT_EQ(dropped[0]["host"], "512MiB");
}

TEST(divergence_check, plugin_names_diverge_and_versions_are_a_note) {
  json w = worker_entry();
  w["plugins"][0]["version"] = "0.9";
  json found = find_divergences(status_of(w));
  ASSERT_EQ(only(found, "plugin").size(), 1u);
  EXPECT_EQ(only(found, "plugin")[0]["severity"], "note");
  EXPECT_FALSE(found["divergent"].get<bool>()) << "a version difference alone is a note";
  w["plugins"][0]["name"] = "other-pager";
  found = find_divergences(status_of(w));
  EXPECT_EQ(only(found, "plugin")[0]["field"], "pager.name");
  EXPECT_TRUE(found["divergent"].get<bool>());
}

TEST(divergence_check, free_view_budget_cgroup_cast_and_models) {
  json w = worker_entry();
  w["free_view"] = "process";
  w["memory_view"] = {
      {"budget_bytes", 900}, {"cgroup_limit_bytes", 4096}, {"own_budget_bytes", 3000}};
  w["cast_high_water_bytes"] = 256;
  w["models"] = {
      {{"key", "unet"}, {"resident_bytes", 10}, {"stand_in", false}},
      {{"key", "vae"}, {"resident_bytes", 10}, {"stand_in", true}, {"stand_in_resident_bytes", 4}}};
  const json found = find_divergences(status_of(w));
  EXPECT_EQ(only(found, "free_view").size(), 1u);
  const json budget = only(found, "budget");
  ASSERT_EQ(budget.size(), 2u) << found.dump(2);
  EXPECT_EQ(budget[0]["field"], "budget_bytes");
  EXPECT_EQ(budget[1]["severity"], "note") << "its own figure is what the one budget replaces";
  EXPECT_EQ(only(found, "cgroup").size(), 1u);
  const json cast = only(found, "cast_bound");
  ASSERT_EQ(cast.size(), 1u);
  EXPECT_EQ(cast[0]["host"], 64);
  EXPECT_EQ(cast[0]["worker"], 256);
  const json models = only(found, "model");
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["field"], "unet");
  EXPECT_EQ(models[1]["host"], 4);
}

TEST(divergence_check, anything_malformed_or_not_ready_is_skipped_without_a_throw) {
  EXPECT_FALSE(find_divergences(json()).value("divergent", true));
  EXPECT_FALSE(find_divergences(json::array()).value("divergent", true));
  json w = worker_entry();
  w["state"] = "restarting";
  w["manager"] = "ledger";
  EXPECT_TRUE(find_divergences(status_of(w))["differences"].empty());
  json odd = worker_entry();
  odd["applied_settings"] = {{"streams", 3}};  // not text
  odd["plugins"] = "x";
  odd["models"] = {1, "x", nullptr};
  odd["memory_view"] = {{"budget_bytes", "lots"}};
  EXPECT_NO_THROW(find_divergences(status_of(odd)));
  EXPECT_NO_THROW(orch::live::format_divergences(find_divergences(status_of(odd))));
}

}  // namespace
