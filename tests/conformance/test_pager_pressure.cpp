// Pager conformance, pressure from other processes (docs/references.md, aimdo §6.7, §5.3):
// what the poll sees and when, a failing poll, the pressure-source selector, and the simple and
// extra headroom. The fixture and the suite's conventions: pager_fixture.hpp.
//
// These scenarios drive the device's pressure controls (a failed poll, other processes' usage,
// the clock), so they run where a device has them: on sim, and on the driver stand-ins (a failing
// cuMemGetInfo / hipMemGetInfo, other usage that lowers what it reports, the harness's clock lent
// to the pager as the host's). Their numbers are what a poll reads free, so each runs on a device
// of exactly its capacity (start_on_whole_device).
#include "pager_fixture.hpp"

namespace orch::test {
namespace {

// Each file of the suite declares and registers its own part under the one suite name, so
// every test keeps its name (sim/pager_conformance/0.<test>).
TYPED_TEST_SUITE_P(pager_conformance);

// A failing pressure poll keeps the budget on its last reading and poll() reports the error.
TYPED_TEST_P(pager_conformance, a_failed_poll_keeps_the_last_reading) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  this->start_on_whole_device(1 * GiB);
  ORCH_RETURN_IF_SKIPPED();
  int64_t before = 0;
  ASSERT_EQ(this->api_->budget_deficit(this->pager_, 0, &before), ORCH_OK);
  ASSERT_EQ(this->env_->inject_fault(ORCH_SIM_FAULT_POLL, ORCH_SIM_FAULT_ALWAYS), ORCH_OK);
  EXPECT_EQ(this->api_->poll(this->pager_), ORCH_DEVICE_ERROR);
  int64_t after = 0;
  ASSERT_EQ(this->api_->budget_deficit(this->pager_, 0, &after), ORCH_OK);
  EXPECT_EQ(after, before);
  orch_region* r = this->region(4 * page);
  EXPECT_EQ(this->fault(r, 0, 1), ORCH_OK);
}

// Cold start: a poll that fails before any reading leaves the budget on the simple term alone
// (aimdo charges the whole request as deficit; docs/design-changes.md). Other usage that a poll
// would have seen is not counted, and the request is not turned into a deficit.
TYPED_TEST_P(pager_conformance, a_failed_first_poll_leaves_the_budget_on_the_simple_term) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  this->start_on_whole_device(1 * GiB);
  ORCH_RETURN_IF_SKIPPED();
  // A reading would put the deficit of 300 MiB at 256 - 512 + 300 = 44 MiB.
  ASSERT_EQ(this->env_->set_other_usage(512 * MiB), ORCH_OK);
  ASSERT_EQ(this->env_->inject_fault(ORCH_SIM_FAULT_POLL, ORCH_SIM_FAULT_ALWAYS), ORCH_OK);
  int64_t deficit = 0;
  ASSERT_EQ(this->api_->budget_deficit(this->pager_, 300 * MiB, &deficit), ORCH_OK);
  EXPECT_EQ(deficit, static_cast<int64_t>(300 * MiB + 256 * MiB) - static_cast<int64_t>(GiB));
  EXPECT_EQ(this->api_->poll(this->pager_), ORCH_DEVICE_ERROR);
  EXPECT_EQ(this->stats().polls, 0u);
  orch_region* r = this->region(4 * page);
  EXPECT_EQ(this->fault(r, 0, 4), ORCH_OK);  // 4 pages fit the simple budget
  EXPECT_EQ(this->info(r).resident_pages, 4u);
}

// L4's pressure-source selector: with ORCH_PRESSURE_NONE other processes' usage is ignored.
TYPED_TEST_P(pager_conformance, pressure_source_none_ignores_the_polled_term) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  this->start_on_whole_device(1 * GiB);
  ORCH_RETURN_IF_SKIPPED();
  ASSERT_EQ(this->env_->set_other_usage(512 * MiB), ORCH_OK);
  int64_t polled = 0;
  ASSERT_EQ(this->api_->poll(this->pager_), ORCH_OK);
  ASSERT_EQ(this->api_->budget_deficit(this->pager_, 0, &polled), ORCH_OK);
  EXPECT_EQ(polled, static_cast<int64_t>(256 * MiB - 512 * MiB));  // floor - free
  ASSERT_EQ(this->api_->set_pressure_source(this->pager_, ORCH_PRESSURE_NONE), ORCH_OK);
  int64_t simple = 0;
  ASSERT_EQ(this->api_->budget_deficit(this->pager_, 0, &simple), ORCH_OK);
  EXPECT_EQ(simple, static_cast<int64_t>(256 * MiB) - static_cast<int64_t>(1 * GiB));
}

// §6.7 (10): usage by another process is seen only once the poll interval has passed: 152 MiB
// of deficit, 5 pages (§5.3).
TYPED_TEST_P(pager_conformance, external_usage_is_seen_only_after_the_poll_interval) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  this->start_on_whole_device(2 * GiB);
  ORCH_RETURN_IF_SKIPPED();
  device_env& env = *this->env_;
  orch_device* dev = env.control();
  ASSERT_EQ(env.set_clock(1000000000ull), ORCH_OK);
  orch_region* r = this->region(64 * page);
  this->run_model(r, 64, 1);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->reclaim(this->pager_, 428 * MiB, ORCH_RECLAIM_DEFICIT, &freed), ORCH_OK);
  // The hooked 300 MiB allocation: real on the device, accounted by the pager.
  uint64_t handle = 0;
  ASSERT_EQ(this->env_->backend()->phys_create(dev, 300 * MiB, &handle), ORCH_OK);
  ASSERT_EQ(this->api_->account_external(this->pager_, 300 * MiB), ORCH_OK);
  ASSERT_EQ(env.set_other_usage(300 * MiB), ORCH_OK);
  this->run_model(r, 64, 1);  // same instant: the last poll is still current
  EXPECT_EQ(this->info(r).resident_pages, 42u);
  ASSERT_EQ(env.advance_clock(2000000000ull), ORCH_OK);
  ASSERT_EQ(this->fault(r, 0, 1), ORCH_OK);  // the fault's stopgap polls and evicts
  this->unpin(r, 0, 1);
  EXPECT_EQ(this->info(r).resident_pages, 37u);
  ASSERT_EQ(this->env_->backend()->phys_release(dev, handle), ORCH_OK);
}

// §6.7 (11): other processes' usage counts inside the simple reserve; the extra headroom stays
// actually free on top of both terms.
TYPED_TEST_P(pager_conformance, simple_headroom_absorbs_other_usage_extra_headroom_does_not) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  const auto steady = [this](uint64_t other, uint64_t extra) -> uint64_t {
    this->start_on_whole_device(2 * GiB, extra);
    if (this->IsSkipped() || this->HasFatalFailure()) return 0;
    EXPECT_EQ(this->api_->set_simple_headroom(512 * MiB), ORCH_OK);
    EXPECT_EQ(this->env_->set_other_usage(other), ORCH_OK);
    orch_region* r = this->region(64 * page);
    this->run_model(r, 64, 1);
    return this->info(r).resident_pages;
  };
  const uint64_t alone = steady(0, 0);
  EXPECT_EQ(alone, 47u);                         // 2048 - 512 MiB = 48 pages, one weight below
  EXPECT_EQ(steady(256 * MiB, 0), alone);        // inside the 512 MiB reserve: no change
  EXPECT_LT(steady(512 * MiB, 0), alone);        // beyond it: the polled term binds
  EXPECT_EQ(steady(0, 256 * MiB), alone - 8);    // extra: 8 pages more stay free
}

REGISTER_TYPED_TEST_SUITE_P(pager_conformance,
                            a_failed_poll_keeps_the_last_reading,
                            a_failed_first_poll_leaves_the_budget_on_the_simple_term,
                            pressure_source_none_ignores_the_polled_term,
                            external_usage_is_seen_only_after_the_poll_interval,
                            simple_headroom_absorbs_other_usage_extra_headroom_does_not);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, pager_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, pager_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, pager_conformance, hip_target);

}  // namespace
}  // namespace orch::test
