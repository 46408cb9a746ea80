// The ledger plugin: whole models against a byte budget, evicted whole in ComfyUI's order (seed
// "Two eras of weight management").
#include <gtest/gtest.h>

#include "orch/plugin/ledger.h"
#include "orch/plugins/loader.hpp"

namespace {

constexpr uint64_t GiB = 1ull << 30;

class ledger_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lib = orch::plugins::plugin_library::open(ORCH_TEST_PLUGIN_LEDGER_SIM);
    ASSERT_TRUE(lib) << lib.err().message;
    lib_ = std::move(*lib);
    ASSERT_TRUE(lib_->init());
    api_ = lib_->table().ledger_api;
    ASSERT_NE(api_, nullptr);
    orch_ledger_config c{sizeof(orch_ledger_config), 0, 10 * GiB};
    ASSERT_EQ(api_->open(&c, &ledger_), ORCH_OK);
  }
  void TearDown() override { lib_->shutdown(); }

  orch_ledger_model* model(uint64_t size, uint32_t refcount = 1) {
    orch_ledger_model* m = nullptr;
    EXPECT_EQ(api_->model_add(ledger_, size, &m), ORCH_OK);
    EXPECT_EQ(api_->model_set_refcount(m, refcount), ORCH_OK);
    return m;
  }
  uint64_t load(orch_ledger_model* m, double budget) {
    uint64_t loaded = 0;
    EXPECT_EQ(api_->model_load(m, budget, &loaded), ORCH_OK);
    return loaded;
  }
  orch_ledger_model_info info(orch_ledger_model* m) {
    orch_ledger_model_info i{};
    i.struct_size = sizeof i;
    EXPECT_EQ(api_->model_info(m, &i), ORCH_OK);
    return i;
  }

  std::unique_ptr<orch::plugins::plugin_library> lib_;
  const orch_ledger_api* api_ = nullptr;
  orch_ledger* ledger_ = nullptr;
};

TEST_F(ledger_test, ledger_is_a_pager_kind_plugin_with_the_ledger_capability) {
  EXPECT_EQ(lib_->table().kind, ORCH_KIND_PAGER);
  EXPECT_EQ(lib_->table().pager_api, nullptr);
  EXPECT_NE(lib_->table().capabilities & ORCH_CAP_LEDGER, 0u);
}

TEST_F(ledger_test, budget_zero_loads_the_whole_model) {
  EXPECT_EQ(load(model(4 * GiB), 0.0), 4 * GiB);
}

// ComfyUI rewrites a budget of 0 to 1e32 before it reaches the ledger; 2^64 is the first double
// an unsigned cast cannot hold. Both mean "the whole model" (casting them is undefined).
TEST_F(ledger_test, budgets_beyond_uint64_load_the_whole_model) {
  EXPECT_EQ(load(model(4 * GiB), 1e32), 4 * GiB);
  EXPECT_EQ(load(model(2 * GiB), 18446744073709551616.0), 2 * GiB);
  EXPECT_EQ(load(model(1 * GiB), static_cast<double>(1 * GiB) + 0.5), 1 * GiB);
}

TEST_F(ledger_test, budget_point_one_loads_essentially_nothing) {
  orch_ledger_model* m = model(4 * GiB);
  EXPECT_EQ(load(m, 0.1), 0u);  // an integer cast would have turned 0.1 into 0: everything
  EXPECT_EQ(info(m).position, 0);
  EXPECT_EQ(info(m).offloaded, 4 * GiB);
}

TEST_F(ledger_test, a_model_loads_partially_up_to_its_budget) {
  orch_ledger_model* m = model(4 * GiB);
  EXPECT_EQ(load(m, static_cast<double>(1 * GiB)), 1 * GiB);
  EXPECT_EQ(info(m).offloaded, 3 * GiB);
}

TEST_F(ledger_test, the_most_offloaded_model_is_evicted_first) {
  orch_ledger_model* full = model(4 * GiB);
  orch_ledger_model* partial = model(4 * GiB);
  load(full, 0.0);
  load(partial, static_cast<double>(2 * GiB));
  orch_ledger_model* incoming = model(6 * GiB);
  EXPECT_EQ(load(incoming, 0.0), 6 * GiB);
  EXPECT_EQ(info(partial).loaded, 0u);
  EXPECT_EQ(info(partial).position, -1);
  EXPECT_EQ(info(full).loaded, 4 * GiB);
}

TEST_F(ledger_test, refcount_breaks_ties_before_size) {
  orch_ledger_model* held = model(3 * GiB, 5);
  orch_ledger_model* loose = model(4 * GiB, 2);
  load(held, 0.0);
  load(loose, 0.0);
  EXPECT_EQ(load(model(6 * GiB), 0.0), 6 * GiB);
  EXPECT_EQ(info(loose).loaded, 0u);  // lower refcount goes first despite being larger
  EXPECT_EQ(info(held).loaded, 3 * GiB);
}

TEST_F(ledger_test, size_breaks_ties_before_position) {
  orch_ledger_model* small = model(2 * GiB);
  orch_ledger_model* large = model(3 * GiB);
  load(large, 0.0);
  load(small, 0.0);  // small is now at position 0, large at 1
  EXPECT_EQ(load(model(7 * GiB), 0.0), 7 * GiB);
  EXPECT_EQ(info(small).loaded, 0u);  // smaller first
  EXPECT_EQ(info(large).loaded, 3 * GiB);
}

TEST_F(ledger_test, position_breaks_the_last_tie_most_recent_first) {
  orch_ledger_model* older = model(3 * GiB);
  orch_ledger_model* newer = model(3 * GiB);
  load(older, 0.0);
  load(newer, 0.0);
  EXPECT_EQ(load(model(5 * GiB), 0.0), 5 * GiB);
  EXPECT_EQ(info(newer).loaded, 0u);  // index 0 goes first: anti-LRU, as in ComfyUI
  EXPECT_EQ(info(older).loaded, 3 * GiB);
}

TEST_F(ledger_test, what_does_not_fit_after_evicting_everything_stays_offloaded) {
  load(model(3 * GiB), 0.0);
  orch_ledger_model* huge = model(12 * GiB);
  EXPECT_EQ(load(huge, 0.0), 10 * GiB);
  EXPECT_EQ(info(huge).offloaded, 2 * GiB);
}

TEST_F(ledger_test, free_memory_reports_bytes_and_says_when_it_could_not_reach_the_target) {
  load(model(4 * GiB), 0.0);
  load(model(4 * GiB), 0.0);
  uint64_t freed = 0;
  EXPECT_EQ(api_->free_memory(ledger_, 5 * GiB, &freed), ORCH_OK);
  EXPECT_EQ(freed, 4 * GiB);  // one whole model was enough: 2 + 4 >= 5
  EXPECT_EQ(api_->free_memory(ledger_, 11 * GiB, &freed), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(freed, 4 * GiB);
  orch_ledger_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(api_->stats(ledger_, &s), ORCH_OK);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.loaded_bytes, 0u);
}

TEST_F(ledger_test, a_negative_or_nan_budget_is_invalid) {
  orch_ledger_model* m = model(GiB);
  uint64_t loaded = 0;
  EXPECT_EQ(api_->model_load(m, -1.0, &loaded), ORCH_INVALID);
  EXPECT_EQ(api_->model_load(m, 0.0 / 0.0, &loaded), ORCH_INVALID);
}

}  // namespace
