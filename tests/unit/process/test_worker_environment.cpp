// The worker's environment is layered: operator, then the pack's [env_vars] (override), then
// host-derived values only where absent (docs/runtime.md, "The worker's environment").
#include <gtest/gtest.h>

#include "orch/process/worker_environment.hpp"

namespace orch::process {
namespace {

TEST(worker_environment, the_operators_environment_is_the_base) {
  const auto env = build_worker_environment({{"PATH", "/usr/bin"}, {"HOME", "/root"}}, {}, {});
  EXPECT_EQ(env, (environment{{"PATH", "/usr/bin"}, {"HOME", "/root"}}));
}

TEST(worker_environment, the_packs_env_vars_override_the_operators) {
  const auto env = build_worker_environment({{"TILE", "32"}, {"PATH", "/usr/bin"}},
                                            {{"TILE", "64"}}, {});
  EXPECT_EQ(env.at("TILE"), "64");
  EXPECT_EQ(env.at("PATH"), "/usr/bin");
}

TEST(worker_environment, host_derived_values_fill_only_absent_names) {
  const auto env = build_worker_environment({{"ORCH_DEVICE", "cpu"}}, {{"ORCH_WORKER_PAGER", "0"}},
                                            {{"ORCH_DEVICE", "sim"},
                                             {"ORCH_WORKER_PAGER", "1"},
                                             {"ORCH_WORKER_ENV", "pack_nodes"}});
  EXPECT_EQ(env.at("ORCH_DEVICE"), "cpu");       // the operator pinned it
  EXPECT_EQ(env.at("ORCH_WORKER_PAGER"), "0");   // the pack pinned it
  EXPECT_EQ(env.at("ORCH_WORKER_ENV"), "pack_nodes");  // absent: derived
}

TEST(worker_environment, envp_strings_are_name_equals_value) {
  EXPECT_EQ(to_envp({{"A", "1"}, {"B", "x=y"}}), (std::vector<std::string>{"A=1", "B=x=y"}));
}

}  // namespace
}  // namespace orch::process
