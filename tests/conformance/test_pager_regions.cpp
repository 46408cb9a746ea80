// Pager conformance, regions and watermarks (docs/references.md, aimdo §6.7, §5.3): VA clamp,
// the steady watermark, preemption between regions, pins, residency queries, prioritize and
// deprioritize, watermark limits. The fixture and the suite's conventions: pager_fixture.hpp.
#include "pager_fixture.hpp"

namespace orch::test {
namespace {

// Each file of the suite declares and registers its own part under the one suite name, so
// every test keeps its name (sim/pager_conformance/0.<test>).
TYPED_TEST_SUITE_P(pager_conformance);

// §6.7 (1): the VA is clamped to floor(capacity / page) pages and the clamp is reported.
TYPED_TEST_P(pager_conformance, va_clamp_40_pages_on_a_32_page_device) {
  uint64_t clamped = 0;
  orch_region* r = this->region(40 * page, &clamped);
  EXPECT_EQ(clamped, 32 * page);
  EXPECT_EQ(this->info(r).nr_pages, 32u);
  EXPECT_EQ(this->info(r).watermark, 32u);
}

// §6.7 (2): one region over budget settles at 23 pages on 1 GiB (budget 768 MiB = 24 pages,
// one weight below it) and faults 23..31 fail.
TYPED_TEST_P(pager_conformance, single_region_over_budget_settles_at_the_steady_watermark) {
  orch_region* r = this->region(32 * page);
  EXPECT_EQ(this->run_model(r, 32, 1), 23u);
  EXPECT_EQ(this->info(r).watermark, 23u);
  EXPECT_EQ(this->info(r).resident_pages, 23u);
  // The second pass is all hits and fast OOMs: nothing is created or evicted.
  const orch_pager_stats before = this->stats();
  EXPECT_EQ(this->run_model(r, 32, 1), 23u);
  const orch_pager_stats after = this->stats();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.evictions, before.evictions);
  EXPECT_EQ(after.hits - before.hits, 23u);
  EXPECT_EQ(after.oom_returns - before.oom_returns, 9u);
}

// The conservatism decision (docs/plugin-abi.md): like aimdo, the steady state sits one faulting
// weight below the simple budget (2 GiB, budget 56 pages): watermark 55, 54, 53, 52 for weights
// of 1, 2, 3, 4 pages (aimdo §5.3).
TYPED_TEST_P(pager_conformance, steady_state_sits_one_weight_below_the_simple_budget) {
  const uint64_t expected[] = {55, 54, 53, 52};
  for (uint64_t w = 1; w <= 4; ++w) {
    this->start(2 * GiB);
    ORCH_RETURN_IF_SKIPPED();
    orch_region* r = this->region(64 * page);
    this->run_model(r, 64 / w, w);
    EXPECT_EQ(this->info(r).watermark, expected[w - 1]) << "weights of " << w << " pages";
  }
}

// §6.7 (3): a newer region preempts an older one from the top; residency is unchanged.
TYPED_TEST_P(pager_conformance, newer_region_preempts_older_from_the_top) {
  orch_region* older = this->region(32 * page);
  this->run_model(older, 32, 1);
  orch_region* newer = this->region(8 * page);
  for (uint64_t p = 0; p < 8; ++p) ASSERT_EQ(this->fault(newer, p, 1), ORCH_OK);  // kept pinned
  EXPECT_EQ(this->info(older).watermark, 15u);
  EXPECT_EQ(this->info(older).resident_pages, 15u);
  EXPECT_EQ(this->info(newer).pinned_pages, 8u);
  EXPECT_EQ(this->resident(), 23 * page);
}

// §6.7 (4): a pinned page passed by the watermark stays until unpin, then is freed.
TYPED_TEST_P(pager_conformance, eviction_while_pinned_frees_at_unpin) {
  orch_region* r = this->region(32 * page);
  ASSERT_EQ(this->fault(r, 0, 4), ORCH_OK);
  uint64_t freed = 1;
  ASSERT_EQ(this->api_->region_evict(r, 4 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, 0u);
  EXPECT_EQ(this->info(r).watermark, 0u);
  EXPECT_EQ(this->info(r).resident_pages, 4u);
  this->unpin(r, 0, 4);
  EXPECT_EQ(this->info(r).resident_pages, 0u);
  EXPECT_EQ(this->resident(), 0u);
  EXPECT_EQ(this->stats().evictions, 4u);
}

// Residency queries: per-page flags, resident and pinned bytes.
TYPED_TEST_P(pager_conformance, residency_queries_report_resident_and_pinned_pages) {
  orch_region* r = this->region(8 * page);
  ASSERT_EQ(this->fault(r, 0, 3), ORCH_OK);
  this->unpin(r, 0, 1);
  std::vector<uint8_t> flags(8);
  size_t len = 0;
  ASSERT_EQ(this->api_->region_residency(r, flags.data(), flags.size(), &len), ORCH_OK);
  EXPECT_EQ(len, 8u);
  const uint8_t both = ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED;
  EXPECT_EQ(flags, (std::vector<uint8_t>{ORCH_PAGE_RESIDENT, both, both, 0, 0, 0, 0, 0}));
  uint64_t bytes = 0;
  ASSERT_EQ(this->api_->pinned_bytes(this->pager_, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, 2 * page);
  ASSERT_EQ(this->api_->region_resident_bytes(r, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, 3 * page);
  EXPECT_EQ(this->api_->region_residency(r, flags.data(), 4, &len), ORCH_INVALID);
  EXPECT_EQ(len, 8u);
}

// deprioritize moves a region to the bottom: it is evicted first.
TYPED_TEST_P(pager_conformance, deprioritize_makes_a_region_the_first_to_be_evicted) {
  orch_region* older = this->region(4 * page);
  orch_region* newer = this->region(4 * page);
  ASSERT_EQ(this->fault(older, 0, 2), ORCH_OK);
  ASSERT_EQ(this->fault(newer, 0, 2), ORCH_OK);
  this->unpin(older, 0, 2);
  this->unpin(newer, 0, 2);
  ASSERT_EQ(this->api_->region_deprioritize(newer), ORCH_OK);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->reclaim(this->pager_, page, 0, &freed), ORCH_OK);
  EXPECT_EQ(freed, page);
  EXPECT_EQ(this->info(newer).resident_pages, 1u);
  EXPECT_EQ(this->info(older).resident_pages, 2u);
  EXPECT_EQ(this->info(newer).watermark, 1u);
  ASSERT_EQ(this->api_->region_deprioritize(older), ORCH_OK);
  ASSERT_EQ(this->api_->reclaim(this->pager_, page, 0, &freed), ORCH_OK);
  EXPECT_EQ(this->info(older).resident_pages, 1u);
  EXPECT_EQ(this->info(newer).resident_pages, 1u);
  ASSERT_EQ(this->api_->region_deprioritize(newer), ORCH_OK);
  EXPECT_EQ(this->info(newer).watermark, 1u);  // the move leaves the watermark (aimdo §2.1)
}

// Held against aimdo on the same trace: only prioritize and set_watermark raise a
// watermark (§2.1, §4.4). An evict with nothing resident walks it 141 -> 0; deprioritize keeps 0.
TYPED_TEST_P(pager_conformance, deprioritize_leaves_the_watermark_where_eviction_put_it) {
  this->start(6021 * MiB);
  ORCH_RETURN_IF_SKIPPED();
  uint64_t clamped = 0;
  orch_region* r = this->region(4501 * MiB, &clamped);
  ASSERT_EQ(clamped, 141 * page);
  uint64_t freed = 1;
  ASSERT_EQ(this->api_->region_evict(r, 477 * MiB, &freed), ORCH_OK);
  EXPECT_EQ(freed, 0u);
  ASSERT_EQ(this->info(r).watermark, 0u);
  ASSERT_EQ(this->api_->region_deprioritize(r), ORCH_OK);
  EXPECT_EQ(this->info(r).watermark, 0u);
  EXPECT_EQ(this->fault(r, 0, 1), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(this->api_->region_prioritize(r), ORCH_OK);
  EXPECT_EQ(this->info(r).watermark, 141u);
}

// §6.7 (5): a fault ending above the watermark fails fast and maps nothing.
TYPED_TEST_P(pager_conformance, fault_above_watermark_returns_oom_without_mapping) {
  orch_region* r = this->region(32 * page);
  ASSERT_EQ(this->api_->region_set_watermark(r, 4 * page), ORCH_OK);
  const orch_pager_stats before = this->stats();
  EXPECT_EQ(this->fault(r, 3, 2), ORCH_OOM_RETRYABLE);  // pages 3..4 end above 4
  EXPECT_EQ(this->info(r).resident_pages, 0u);
  EXPECT_EQ(this->stats().misses, before.misses);
  EXPECT_EQ(this->stats().oom_returns, before.oom_returns + 1);
  EXPECT_EQ(this->fault(r, 0, 4), ORCH_OK);  // below the watermark still works
  EXPECT_EQ(this->info(r).pinned_pages, 4u);
}

// §6.7 (6): prioritize resets the watermark; re-faulted pages get new serials and, on the
// backing store, their old contents are gone (poisoned).
TYPED_TEST_P(pager_conformance, prioritize_resets_watermark_and_refaults_get_new_serials) {
  if (this->env_->is_sim()) {
    this->start(1 * GiB, 0, ORCH_SIM_FREE_DEVICE, /*backing=*/true);
    ORCH_RETURN_IF_SKIPPED();
  }
  orch_region* r = this->region(32 * page);
  std::vector<uint64_t> first;
  std::vector<uint64_t> again;
  uint64_t newly = 0;
  ASSERT_EQ(this->fault(r, 0, 4, &first, &newly), ORCH_OK);
  EXPECT_EQ(newly, 4u);
  // On sim's backing store, write through the pager's own device view of page 0.
  unsigned char* data = nullptr;
  if (this->env_->is_sim()) {
    const orch_backend_api* be = this->api_->backend(this->pager_);
    data = static_cast<unsigned char*>(
        be->host_pointer(this->api_->device(this->pager_), this->info(r).base));
    ASSERT_NE(data, nullptr);
    data[0] = 0x11;
  }
  this->unpin(r, 0, 4);
  // Untouched pages keep their signature: nothing needs copying.
  ASSERT_EQ(this->fault(r, 0, 4, &again, &newly), ORCH_OK);
  EXPECT_EQ(again, first);
  EXPECT_EQ(newly, 0u);
  if (data != nullptr) {
    EXPECT_EQ(data[0], 0x11);
  }  // same signature, same contents
  this->unpin(r, 0, 4);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->region_evict(r, 4 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, 4 * page);
  EXPECT_EQ(this->fault(r, 0, 1), ORCH_OOM_RETRYABLE);  // watermark is at 0
  ASSERT_EQ(this->api_->region_prioritize(r), ORCH_OK);
  EXPECT_EQ(this->info(r).watermark, 32u);
  ASSERT_EQ(this->fault(r, 0, 4, &again, &newly), ORCH_OK);
  EXPECT_EQ(newly, 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(again[i], first[i]) << "page " << i;
  if (data != nullptr) {
    const orch_backend_api* be = this->api_->backend(this->pager_);
    const auto* now = static_cast<const unsigned char*>(
        be->host_pointer(this->api_->device(this->pager_), this->info(r).base));
    ASSERT_NE(now, nullptr);
    EXPECT_EQ(now[0], ORCH_SIM_POISON);  // a changed signature means the contents were lost
  }
}

// §6.7 (7): a watermark limit protects a floor; resetting the limits clears it. Numbers from the
// §5.3 table: the older region reaches 19, the newer one keeps exactly 4 pages.
TYPED_TEST_P(pager_conformance, watermark_limit_protects_a_floor_and_reset_clears_it) {
  orch_region* older = this->region(32 * page);
  this->run_model(older, 32, 1);
  orch_region* newer = this->region(8 * page);
  for (uint64_t p = 0; p < 8; ++p) ASSERT_EQ(this->fault(newer, p, 1), ORCH_OK);
  this->unpin(newer, 0, 8);
  ASSERT_EQ(this->api_->region_set_watermark_limit(newer, 4 * page), ORCH_OK);
  ASSERT_EQ(this->api_->region_prioritize(older), ORCH_OK);
  this->run_model(older, 32, 1);
  EXPECT_EQ(this->info(older).watermark, 19u);
  EXPECT_EQ(this->info(newer).resident_pages, 4u);
  EXPECT_EQ(this->info(newer).watermark_limit, 4u);
  ASSERT_EQ(this->api_->reset_watermark_limits(this->pager_), ORCH_OK);
  EXPECT_EQ(this->info(newer).watermark_limit, 0u);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->reclaim(this->pager_, 4 * page, 0, &freed), ORCH_OK);
  EXPECT_EQ(freed, 4 * page);  // the newer region is now the lowest priority, and unprotected
  EXPECT_EQ(this->info(newer).resident_pages, 0u);
}

REGISTER_TYPED_TEST_SUITE_P(pager_conformance,
                            va_clamp_40_pages_on_a_32_page_device,
                            single_region_over_budget_settles_at_the_steady_watermark,
                            steady_state_sits_one_weight_below_the_simple_budget,
                            newer_region_preempts_older_from_the_top,
                            eviction_while_pinned_frees_at_unpin,
                            residency_queries_report_resident_and_pinned_pages,
                            deprioritize_makes_a_region_the_first_to_be_evicted,
                            deprioritize_leaves_the_watermark_where_eviction_put_it,
                            fault_above_watermark_returns_oom_without_mapping,
                            prioritize_resets_watermark_and_refaults_get_new_serials,
                            watermark_limit_protects_a_floor_and_reset_clears_it);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, pager_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, pager_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, pager_conformance, hip_target);

}  // namespace
}  // namespace orch::test
