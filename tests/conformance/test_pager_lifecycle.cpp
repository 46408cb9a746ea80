// Pager conformance, lifecycle and robustness (docs/references.md, aimdo §6.7, §4.8): init and
// shutdown, backend errors, two devices, concurrent fault and reclaim, and the sync discipline.
// The fixture and the suite's conventions: pager_fixture.hpp.
#include <atomic>
#include <thread>

#include "pager_fixture.hpp"

namespace orch::test {
namespace {

// Each file of the suite declares and registers its own part under the one suite name, so
// every test keeps its name (sim/pager_conformance/0.<test>).
TYPED_TEST_SUITE_P(pager_conformance);

// As aimdo's vbar_free (§2.1, §4.8): destroying a region with resident pages syncs before
// freeing them and again after.
TYPED_TEST_P(pager_conformance, region_destroy_syncs_before_and_after_freeing) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  orch_region* r = this->region(8 * page);
  ASSERT_EQ(this->fault(r, 0, 4), ORCH_OK);
  this->unpin(r, 0, 2);  // two pinned pages are freed too
  const orch_sim_counters before = this->env_->counters();
  this->api_->region_destroy(r);
  const orch_sim_counters after = this->env_->counters();
  EXPECT_EQ(after.releases - before.releases, 4u);
  EXPECT_EQ(after.syncs - before.syncs, 2u);
  EXPECT_EQ(after.process_used_bytes, 0u);
  orch_region* empty = this->region(8 * page);
  this->api_->region_destroy(empty);  // nothing resident: nothing to wait for
  EXPECT_EQ(this->env_->counters().syncs, after.syncs);
}

// §6.7 (12): a non-OOM backend error answers DEVICE_ERROR and leaves the state consistent.
TYPED_TEST_P(pager_conformance, backend_error_returns_device_error_and_state_stays_consistent) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  orch_region* r = this->region(32 * page);
  ASSERT_EQ(this->fault(r, 0, 2), ORCH_OK);
  this->unpin(r, 0, 2);
  ASSERT_EQ(this->env_->inject_fault(ORCH_SIM_FAULT_DEVICE_ERROR, 1), ORCH_OK);
  EXPECT_EQ(this->fault(r, 2, 2), ORCH_DEVICE_ERROR);
  ASSERT_EQ(this->env_->inject_fault(ORCH_SIM_FAULT_MAP, 1), ORCH_OK);
  EXPECT_EQ(this->fault(r, 2, 2), ORCH_DEVICE_ERROR);
  EXPECT_EQ(this->stats().errors, 2u);
  EXPECT_EQ(this->info(r).resident_pages, 2u);
  EXPECT_EQ(this->info(r).pinned_pages, 0u);
  EXPECT_EQ(this->env_->counters().process_used_bytes, 2 * page);  // nothing leaked
  EXPECT_EQ(this->fault(r, 2, 2), ORCH_OK);                         // and it recovers
  EXPECT_EQ(this->env_->counters().process_used_bytes, 4 * page);
}

// §6.7 (13): a second init and a double shutdown are harmless.
TYPED_TEST_P(pager_conformance, second_init_and_double_shutdown_are_harmless) {
  const orch_plugin_table& t = this->lib_->table();
  EXPECT_EQ(t.init(nullptr), ORCH_ALREADY_INITIALISED);
  orch_region* r = this->region(4 * page);
  ASSERT_EQ(this->fault(r, 0, 1), ORCH_OK);  // the first init's state is undisturbed
  t.shutdown();
  t.shutdown();
  orch_pager* p = nullptr;
  orch_pager_config c = pager_config(*this->env_);
  EXPECT_EQ(this->api_->device_open(&c, &p), ORCH_NOT_INITIALISED);
  if (this->env_->has_controls()) {
    EXPECT_EQ(this->env_->counters().process_used_bytes, 0u);
  }
  ASSERT_EQ(t.init(nullptr), ORCH_OK);
  EXPECT_EQ(this->api_->device_open(&c, &this->pager_), ORCH_OK);
}

// §6.7 (14): two devices do not interact.
// On a driver the second device is its device 1 (the stand-ins have two).
TYPED_TEST_P(pager_conformance, two_devices_do_not_interact) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  device_env second;
  ASSERT_EQ(second.open_another(TypeParam::get(), 1 * GiB), "");
  orch_pager_config c = pager_config(second, ORCH_LEVEL_2);
  orch_pager* other = nullptr;
  ASSERT_EQ(this->api_->device_open(&c, &other), ORCH_OK);
  orch_region* a = this->region(32 * page);
  this->run_model(a, 32, 1);
  orch_region* b = nullptr;
  ASSERT_EQ(this->api_->region_create(other, 32 * page, &b, nullptr), ORCH_OK);
  for (uint64_t p = 0; p < 20; ++p) ASSERT_EQ(this->fault(b, p, 1), ORCH_OK);
  EXPECT_EQ(this->info(a).resident_pages, 23u);
  EXPECT_EQ(this->info(a).watermark, 23u);
  EXPECT_EQ(second.counters().used_bytes, 20 * page);
  EXPECT_EQ(this->env_->counters().used_bytes, 23 * page);
  this->api_->device_close(other);
  EXPECT_EQ(second.counters().used_bytes, 0u);
}

// §6.7 (15): concurrent fault and reclaim from two threads keep the books exact. The reclaimer
// try-locks, as an allocation path must.
TYPED_TEST_P(pager_conformance, concurrent_fault_and_reclaim_keep_the_books_exact) {
  orch_region* r = this->region(32 * page);
  std::atomic<bool> bad{false};
  std::thread model([&] {
    for (int pass = 0; pass < 200; ++pass)
      for (uint64_t w = 0; w < 32; ++w) {
        const orch_status st = this->api_->region_fault(r, w * page, page, nullptr, 0, nullptr,
                                                        nullptr);
        if (st == ORCH_OK) {
          if (this->api_->region_unpin(r, w * page, page) != ORCH_OK) bad = true;
        } else if (st != ORCH_OOM_RETRYABLE) {
          bad = true;
        }
        if (w == 31) this->api_->region_prioritize(r);
      }
  });
  std::thread allocator([&] {
    for (int i = 0; i < 5000; ++i) {
      uint64_t freed = 0;
      const orch_status st = this->api_->reclaim(this->pager_, page, ORCH_RECLAIM_TRY_LOCK, &freed);
      if (st != ORCH_OK && st != ORCH_BUSY) bad = true;
      if (st == ORCH_BUSY && freed != 0) bad = true;
    }
  });
  model.join();
  allocator.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(this->info(r).pinned_pages, 0u);
  EXPECT_EQ(this->resident(), this->info(r).resident_pages * page);
  if (this->env_->has_controls()) {
    EXPECT_EQ(this->env_->counters().process_used_bytes, this->resident());
  }
}

// Sync discipline (§4.8): the hit path never synchronises; an eviction pass syncs twice.
TYPED_TEST_P(pager_conformance, hit_path_never_syncs_and_eviction_syncs_twice) {
  if (!this->env_->has_controls()) GTEST_SKIP() << "needs the sim device's controls";
  orch_region* r = this->region(32 * page);
  ASSERT_EQ(this->fault(r, 0, 4), ORCH_OK);
  this->unpin(r, 0, 4);
  const uint64_t syncs = this->env_->counters().syncs;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(this->fault(r, 0, 4), ORCH_OK);
    this->unpin(r, 0, 4);
  }
  EXPECT_EQ(this->env_->counters().syncs, syncs);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->reclaim(this->pager_, 2 * page, 0, &freed), ORCH_OK);
  EXPECT_EQ(freed, 2 * page);
  EXPECT_EQ(this->env_->counters().syncs, syncs + 2);
}

REGISTER_TYPED_TEST_SUITE_P(pager_conformance,
                            region_destroy_syncs_before_and_after_freeing,
                            backend_error_returns_device_error_and_state_stays_consistent,
                            second_init_and_double_shutdown_are_harmless,
                            two_devices_do_not_interact,
                            concurrent_fault_and_reclaim_keep_the_books_exact,
                            hit_path_never_syncs_and_eviction_syncs_twice);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, pager_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, pager_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, pager_conformance, hip_target);

}  // namespace
}  // namespace orch::test
