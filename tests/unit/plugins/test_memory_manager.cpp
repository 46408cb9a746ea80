// Memory-manager resolution, host and worker (docs/memory-semantics.md): one rule per test.
#include <map>

#include <gtest/gtest.h>

#include "orch/plugins/memory_manager.hpp"

namespace orch::plugins {
namespace {

host_manager_inputs sim_host() {
  host_manager_inputs in;
  in.device = "sim";
  return in;
}

TEST(host_manager, pager_is_the_default) {
  const auto c = resolve_host_manager(sim_host());
  EXPECT_EQ(c.manager, memory_manager::pager);
  EXPECT_EQ(manager_log_line(c), "memory manager: pager (default)");
}

TEST(host_manager, each_flag_selects_the_ledger_naming_the_flag) {
  const std::map<std::string, bool host_memory_flags::*> flags = {
      {"--disable-dynamic-vram", &host_memory_flags::disable_dynamic_vram},
      {"--highvram", &host_memory_flags::highvram},
      {"--gpu-only", &host_memory_flags::gpu_only},
      {"--novram", &host_memory_flags::novram},
      {"--cpu", &host_memory_flags::cpu}};
  for (const auto& [name, member] : flags) {
    auto in = sim_host();
    in.flags.*member = true;
    const auto c = resolve_host_manager(in);
    EXPECT_EQ(c.manager, memory_manager::ledger) << name;
    EXPECT_EQ(c.reason, "disabled by " + name);
  }
}

TEST(host_manager, unsupported_device_selects_the_ledger) {
  auto in = sim_host();
  in.device = "cpu";
  in.device_supports_pager = false;
  const auto c = resolve_host_manager(in);
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(manager_log_line(c), "memory manager: ledger (device cpu has no pager)");
}

TEST(host_manager, runtime_below_the_floor_selects_the_ledger) {
  auto in = sim_host();
  in.below_floor = "pager plugin level L1 is below the floor L2";
  const auto c = resolve_host_manager(in);
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(c.reason, "pager plugin level L1 is below the floor L2");
}

TEST(host_manager, enable_dynamic_vram_forces_the_pager_past_flags_device_and_floor) {
  auto in = sim_host();
  in.flags.enable_dynamic_vram = true;
  in.flags.highvram = true;
  in.device_supports_pager = false;
  in.below_floor = "too old";
  const auto c = resolve_host_manager(in);
  EXPECT_EQ(c.manager, memory_manager::pager);
  EXPECT_EQ(c.reason, "forced by --enable-dynamic-vram");
}

TEST(host_manager, failed_init_selects_the_ledger_even_when_forced) {
  auto in = sim_host();
  in.flags.enable_dynamic_vram = true;
  in.init_error = "device error";
  const auto c = resolve_host_manager(in);
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(c.reason, "pager init failed: device error");
}

auto env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(worker_manager, unset_means_the_ledger_with_no_parent_signal) {
  const auto c = resolve_worker_manager({read_pager_signal(env_of({})), true, std::nullopt});
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(c.reason, "no parent signal");
}

TEST(worker_manager, empty_and_blank_values_are_no_signal) {
  EXPECT_EQ(resolve_worker_manager(
                {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", ""}})), true, std::nullopt})
                .reason,
            "no parent signal");
  EXPECT_EQ(resolve_worker_manager(
                {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "  "}})), true, std::nullopt})
                .reason,
            "no parent signal");
}

TEST(worker_manager, falsy_values_disable_it_naming_the_variable) {
  for (const char* v : {"0", "false", "no", "off", "OFF", " False "}) {
    const auto c = resolve_worker_manager(
        {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", v}})), true, std::nullopt});
    EXPECT_EQ(c.manager, memory_manager::ledger) << v;
    EXPECT_EQ(c.reason, "disabled by ORCH_WORKER_PAGER") << v;
  }
}

TEST(worker_manager, truthy_value_on_a_gpu_device_runs_the_pager) {
  const auto c = resolve_worker_manager(
      {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "1"}})), true, std::nullopt});
  EXPECT_EQ(c.manager, memory_manager::pager);
  EXPECT_EQ(c.reason, "enabled by ORCH_WORKER_PAGER");
}

TEST(worker_manager, comfy_env_alias_is_accepted) {
  const auto on = resolve_worker_manager(
      {read_pager_signal(env_of({{"COMFY_ENV_WORKER_AIMDO", "1"}})), true, std::nullopt});
  EXPECT_EQ(on.manager, memory_manager::pager);
  EXPECT_EQ(on.reason, "enabled by COMFY_ENV_WORKER_AIMDO");
  const auto off = resolve_worker_manager(
      {read_pager_signal(env_of({{"COMFY_ENV_WORKER_AIMDO", "no"}})), true, std::nullopt});
  EXPECT_EQ(off.reason, "disabled by COMFY_ENV_WORKER_AIMDO");
}

TEST(worker_manager, orch_variable_wins_over_the_alias) {
  const auto c = resolve_worker_manager(
      {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "0"}, {"COMFY_ENV_WORKER_AIMDO", "1"}})),
       true, std::nullopt});
  EXPECT_EQ(c.reason, "disabled by ORCH_WORKER_PAGER");
}

TEST(worker_manager, cpu_worker_resolves_to_ledger_with_reason) {
  const auto c = resolve_worker_manager(
      {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "1"}})), false, std::nullopt});
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(c.reason, "no GPU device in this process");
}

TEST(worker_manager, plugin_init_failure_resolves_to_ledger_with_the_error) {
  const auto c = resolve_worker_manager(
      {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "1"}})), true, "map failure"});
  EXPECT_EQ(c.manager, memory_manager::ledger);
  EXPECT_EQ(c.reason, "pager init failed: map failure");
}

TEST(flag_variables, blank_falsy_and_set_read_the_same_everywhere) {
  for (const char* v : {"", " ", "\t\n"}) EXPECT_EQ(read_flag(v), flag_reading::blank) << v;
  for (const char* v : {"0", "false", "No", " OFF ", "FALSE"}) {
    EXPECT_EQ(read_flag(v), flag_reading::falsy) << v;
  }
  for (const char* v : {"1", "yes", "on", "true", " TRUE "}) {
    EXPECT_EQ(read_flag(v), flag_reading::set) << v;
  }
  for (const char* v : {"maybe", "anything", "00", "1\x1b[2J"}) {
    EXPECT_EQ(read_flag(v), flag_reading::unrecognised) << v;
  }
}

TEST(flag_variables, an_unrecognised_value_is_read_as_on_and_never_silently) {
  const auto c = resolve_worker_manager(
      {read_pager_signal(env_of({{"ORCH_WORKER_PAGER", "maybe"}})), true, std::nullopt});
  EXPECT_EQ(c.manager, memory_manager::pager);
  EXPECT_NE(c.reason.find("\"maybe\" is neither true nor false"), std::string::npos) << c.reason;
  const auto w = unrecognised_flag_warning("COMFY_ENV_WORKER_AIMDO", "on\x1b[31m\n", "true");
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, "COMFY_ENV_WORKER_AIMDO = \"on\\e[31m\\n\" is neither true nor false; read "
                "as true (use 1 or 0)");
  EXPECT_FALSE(unrecognised_flag_warning("ORCH_WORKER_PAGER", "0", "true"));
  EXPECT_FALSE(unrecognised_flag_warning("ORCH_WORKER_PAGER", "yes", "true"));
}

TEST(worker_manager, host_exports_one_or_zero) {
  EXPECT_STREQ(worker_pager_value(memory_manager::pager), "1");
  EXPECT_STREQ(worker_pager_value(memory_manager::ledger), "0");
}

}  // namespace
}  // namespace orch::plugins
