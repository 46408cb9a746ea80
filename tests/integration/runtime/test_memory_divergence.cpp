// Memory semantics across processes: the divergence report, a WARNING once per env whose
// manager differs from the host's, and how an operator acknowledges it.
// docs/memory-semantics.md.
#include "memory_semantics_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

// --- Divergence reports ----------------------------------------------------------------------

TEST_F(memory_semantics, the_warning_is_said_once_per_env_and_again_after_a_replacement) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = test_env();
  const std::string warning = "WARNING " + env + ": memory manager=ledger, host=pager";
  EXPECT_EQ(logs_->count(warning), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("ORCH_DIVERGENCE_ACK=1"), 1u);
  call(env, "TestEmpty", json::object(), 1);
  call(env, "TestEmpty", json::object(), 2);
  EXPECT_EQ(logs_->count(warning), 1u) << "not again on the next prompt";
  ASSERT_TRUE(kill_and_wait_for_replacement(env));
  EXPECT_EQ(logs_->count(warning), 2u) << "again for the replacement";
}

TEST_F(memory_semantics, an_acknowledged_divergence_is_only_the_routine_line_under_debug) {
  set_operator_var("ORCH_DEBUG_WORKER", "1");
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\nORCH_DIVERGENCE_ACK = \"1\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("WARNING"), 0u);
  EXPECT_EQ(logs_->count(test_env() + ": memory manager=ledger (disabled by ORCH_WORKER_PAGER)"),
            1u)
      << logs_->all();
}

TEST_F(memory_semantics, a_falsy_acknowledgement_does_not_silence_the_warning) {
  set_operator_var("ORCH_DIVERGENCE_ACK", "0");  // the shell: present, but says no
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  o.sampler_pack_env = "ORCH_WORKER_PAGER = \"0\"\nORCH_DIVERGENCE_ACK = \" off \"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("WARNING " + test_env() + ":"), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("WARNING " + env_of(*host_, "SimSampler") + ":"), 1u) << logs_->all();
}

}  // namespace
}  // namespace orch::runtime_testing
