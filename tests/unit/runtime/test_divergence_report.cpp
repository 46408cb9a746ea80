// When the host says a worker diverges, and how often (docs/memory-semantics.md).
#include <map>

#include <gtest/gtest.h>

#include "orch/runtime/divergence_report.hpp"

namespace orch::runtime {
namespace {

using plugins::manager_choice;
using plugins::memory_manager;

const manager_choice host_pager{memory_manager::pager, "default"};
const manager_choice worker_ledger{memory_manager::ledger, "disabled by ORCH_WORKER_PAGER"};
const manager_choice worker_pager{memory_manager::pager, "enabled by ORCH_WORKER_PAGER"};

TEST(divergence_report, warning_names_env_both_managers_reason_and_how_to_silence) {
  divergence_reporter r(host_pager, false);
  const auto lines = r.on_worker_ready({"legacy-nodes", worker_ledger, {}, false});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, report_level::warning);
  EXPECT_EQ(lines[0].text,
            "WARNING legacy-nodes: memory manager=ledger, host=pager; worker fell back (disabled "
            "by ORCH_WORKER_PAGER). Set ORCH_DIVERGENCE_ACK=1 in the pack's [env_vars] to "
            "silence.");
}

TEST(divergence_report, said_once_per_env_and_again_after_replacement) {
  divergence_reporter r(host_pager, false);
  EXPECT_EQ(r.on_worker_ready({"legacy-nodes", worker_ledger, {}, false}).size(), 1u);
  EXPECT_TRUE(r.on_worker_ready({"legacy-nodes", worker_ledger, {}, false}).empty());
  r.on_worker_replaced("legacy-nodes");
  EXPECT_EQ(r.on_worker_ready({"legacy-nodes", worker_ledger, {}, false}).size(), 1u);
}

TEST(divergence_report, matching_worker_is_silent_unless_debugging) {
  divergence_reporter quiet(host_pager, false);
  EXPECT_TRUE(quiet.on_worker_ready({"img-nodes", worker_pager, {}, false}).empty());
  divergence_reporter debug(host_pager, true);
  const auto lines = debug.on_worker_ready({"img-nodes", worker_pager, {}, false});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, report_level::debug);
  EXPECT_EQ(lines[0].text,
            "img-nodes: memory manager=pager (enabled by ORCH_WORKER_PAGER), host=pager "
            "(default)");
}

TEST(divergence_report, acknowledged_divergence_is_only_the_routine_line) {
  divergence_reporter r(host_pager, false);
  EXPECT_TRUE(r.on_worker_ready({"legacy-nodes", worker_ledger, {}, true}).empty());
}

TEST(divergence_report, version_difference_is_a_note) {
  divergence_reporter r(host_pager, false);
  const auto lines =
      r.on_worker_ready({"img-nodes", worker_pager, {"pager sim-pager 0.3, host 0.4"}, false});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, report_level::note);
  EXPECT_EQ(lines[0].text, "NOTE img-nodes: pager sim-pager 0.3, host 0.4");
}

TEST(divergence_report, debug_variable_and_alias) {
  auto env = [](std::map<std::string, std::string> vars) {
    return [vars](const char* n) -> std::optional<std::string> {
      auto it = vars.find(n);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  };
  EXPECT_FALSE(debug_worker_enabled(env({})));
  EXPECT_TRUE(debug_worker_enabled(env({{"ORCH_DEBUG_WORKER", "1"}})));
  EXPECT_TRUE(debug_worker_enabled(env({{"COMFY_ENV_DEBUG_WORKER", "yes"}})));
  EXPECT_FALSE(debug_worker_enabled(env({{"ORCH_DEBUG_WORKER", "off"}})));
}

}  // namespace
}  // namespace orch::runtime
