// The ledger conformance suite: what every ledger plugin promises (plugins/include/orch/plugin/
// ledger.h; docs/plugin-abi.md): an idempotent lifecycle, whole models loaded against a byte budget
// and evicted whole, exact accounts, a release report for every byte that leaves the device, and
// invalid arguments or dead handles refused. ComfyUI's eviction order itself is specified by the
// unit tests (tests/unit/plugins/test_ledger.cpp).
//
// The ledger keeps accounts only and never touches a device, so every instantiation runs on any
// machine, cuda and hip included: only the backend named in its table differs.
#include <limits>
#include <mutex>
#include <vector>

#include "orch/plugin/ledger.h"
#include "orch/plugin/levels.h"
#include "targets.hpp"

namespace orch::test {
namespace {

template <typename Target>
class ledger_conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const target t = Target::get();
    if (t.ledger_plugin == nullptr) GTEST_SKIP() << t.name << " ledger is not built here";
    auto lib = plugins::plugin_library::open(relocated(t.ledger_plugin));
    ASSERT_TRUE(lib) << lib.err().message;
    lib_ = std::move(*lib);
    // Services of our own, so that the release reports the ledger sends can be counted.
    host_.struct_size = sizeof host_;
    host_.ctx = this;
    host_.report_release = &ledger_conformance::on_release;
    const auto st = lib_->init(&host_);
    ASSERT_TRUE(st) << st.err().message;
    api_ = lib_->table().ledger_api;
    ASSERT_NE(api_, nullptr);
    ledger_ = open_ledger(10 * GiB);
    ASSERT_NE(ledger_, nullptr);
  }

  void TearDown() override {
    if (lib_ != nullptr) lib_->shutdown();  // closes every ledger still open
  }

  orch_ledger* open_ledger(uint64_t budget) {
    orch_ledger_config c{};
    c.struct_size = sizeof c;
    c.budget = budget;
    orch_ledger* l = nullptr;
    EXPECT_EQ(api_->open(&c, &l), ORCH_OK);
    return l;
  }

  orch_ledger_model* model(uint64_t size, orch_ledger* l = nullptr) {
    orch_ledger_model* m = nullptr;
    EXPECT_EQ(api_->model_add(l != nullptr ? l : ledger_, size, &m), ORCH_OK);
    return m;
  }

  uint64_t load(orch_ledger_model* m, double budget = 0.0) {
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

  orch_ledger_stats stats(orch_ledger* l = nullptr) {
    orch_ledger_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(api_->stats(l != nullptr ? l : ledger_, &s), ORCH_OK);
    return s;
  }

  static void on_release(void* ctx, const orch_release_report* report) {
    auto* self = static_cast<ledger_conformance*>(ctx);
    std::lock_guard lock(self->reports_mutex_);
    self->reports_.push_back(*report);
  }

  std::vector<orch_release_report> reports() {
    std::lock_guard lock(reports_mutex_);
    return reports_;
  }

  uint64_t reported_bytes() {
    uint64_t total = 0;
    for (const auto& r : reports()) total += r.bytes;
    return total;
  }

  std::unique_ptr<plugins::plugin_library> lib_;
  orch_host_services host_{};
  const orch_ledger_api* api_ = nullptr;
  orch_ledger* ledger_ = nullptr;
  std::mutex reports_mutex_;
  std::vector<orch_release_report> reports_;
};

TYPED_TEST_SUITE_P(ledger_conformance);

// The ledger is the host's fallback for every level (docs/memory-semantics.md): a pager-kind
// plugin with the ledger capability, for the backend it was built for.
TYPED_TEST_P(ledger_conformance, is_a_pager_kind_plugin_for_its_backend_at_every_level) {
  const orch_plugin_table& t = this->lib_->table();
  EXPECT_EQ(t.kind, ORCH_KIND_PAGER);
  EXPECT_NE(t.capabilities & ORCH_CAP_LEDGER, 0u);
  EXPECT_EQ(t.pager_api, nullptr);
  EXPECT_EQ(t.backend, TypeParam::get().backend);
  EXPECT_EQ(t.min_level, static_cast<uint32_t>(ORCH_LEVEL_MIN));
  EXPECT_EQ(t.max_level, static_cast<uint32_t>(ORCH_LEVEL_MAX));
}

// A second init answers ALREADY_INITIALISED and disturbs nothing; shutdown may be called any
// number of times; the plugin comes back up after it.
TYPED_TEST_P(ledger_conformance, init_is_idempotent_and_shutdown_may_repeat) {
  const orch_plugin_table& t = this->lib_->table();
  orch_ledger_model* m = this->model(1 * GiB);
  ASSERT_EQ(this->load(m), 1 * GiB);
  EXPECT_EQ(t.init(&this->host_), ORCH_ALREADY_INITIALISED);
  EXPECT_EQ(this->info(m).loaded, 1 * GiB);  // the first init's state is undisturbed
  EXPECT_EQ(this->stats().loaded_bytes, 1 * GiB);
  t.shutdown();
  t.shutdown();
  orch_ledger_config c{};
  c.struct_size = sizeof c;
  c.budget = 1 * GiB;
  orch_ledger* l = nullptr;
  EXPECT_EQ(this->api_->open(&c, &l), ORCH_NOT_INITIALISED);
  ASSERT_EQ(t.init(&this->host_), ORCH_OK);
  EXPECT_EQ(this->api_->open(&c, &l), ORCH_OK);
}

// Shutdown closes every ledger: while down a call answers NOT_INITIALISED, and after the next
// init a handle from before is refused, never dereferenced.
TYPED_TEST_P(ledger_conformance, handles_from_before_a_shutdown_are_refused) {
  const orch_plugin_table& t = this->lib_->table();
  orch_ledger* old = this->ledger_;
  orch_ledger_model* m = this->model(1 * GiB);
  t.shutdown();
  EXPECT_EQ(this->api_->set_budget(old, 1 * GiB), ORCH_NOT_INITIALISED);
  EXPECT_EQ(this->api_->model_load(m, 0.0, nullptr), ORCH_NOT_INITIALISED);
  orch_ledger_model* added = nullptr;
  EXPECT_EQ(this->api_->model_add(old, 1 * GiB, &added), ORCH_NOT_INITIALISED);
  ASSERT_EQ(t.init(&this->host_), ORCH_OK);
  EXPECT_EQ(this->api_->set_budget(old, 1 * GiB), ORCH_INVALID);
  EXPECT_EQ(this->api_->model_load(m, 0.0, nullptr), ORCH_INVALID);
  orch_ledger_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(this->api_->stats(old, &s), ORCH_INVALID);
  this->api_->model_remove(m);  // harmless on a dead handle
  this->api_->close(old);
}

TYPED_TEST_P(ledger_conformance, loads_are_accounted_against_the_budget) {
  orch_ledger_model* a = this->model(3 * GiB);
  orch_ledger_model* b = this->model(2 * GiB);
  EXPECT_EQ(this->info(a).position, -1) << "not loaded yet";
  EXPECT_EQ(this->info(a).offloaded, 3 * GiB);
  EXPECT_EQ(this->load(a), 3 * GiB);
  EXPECT_EQ(this->load(b, static_cast<double>(1 * GiB)), 1 * GiB);  // partial
  const orch_ledger_model_info ia = this->info(a);
  const orch_ledger_model_info ib = this->info(b);
  EXPECT_EQ(ia.size, 3 * GiB);
  EXPECT_EQ(ia.loaded, 3 * GiB);
  EXPECT_EQ(ia.offloaded, 0u);
  EXPECT_EQ(ia.position, 1);
  EXPECT_EQ(ib.loaded, 1 * GiB);
  EXPECT_EQ(ib.offloaded, 1 * GiB);
  EXPECT_EQ(ib.position, 0) << "the latest load is at position 0";
  const orch_ledger_stats s = this->stats();
  EXPECT_EQ(s.loads, 2u);
  EXPECT_EQ(s.loaded_bytes, 4 * GiB);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_TRUE(this->reports().empty()) << "nothing left the device";
}

// An unload on request frees exactly what was loaded and reports it as a targeted release; it is
// not an eviction.
TYPED_TEST_P(ledger_conformance, unload_frees_what_was_loaded_and_reports_it) {
  orch_ledger_model* m = this->model(2 * GiB);
  ASSERT_EQ(this->load(m), 2 * GiB);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->model_unload(m, &freed), ORCH_OK);
  EXPECT_EQ(freed, 2 * GiB);
  EXPECT_EQ(this->info(m).loaded, 0u);
  EXPECT_EQ(this->info(m).position, -1);
  EXPECT_EQ(this->stats().loaded_bytes, 0u);
  EXPECT_EQ(this->stats().evictions, 0u);
  const auto r = this->reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].reason, ORCH_RELEASE_TARGETED);
  EXPECT_EQ(r[0].bytes, 2 * GiB);
  ASSERT_EQ(this->api_->model_unload(m, &freed), ORCH_OK);
  EXPECT_EQ(freed, 0u);
  EXPECT_EQ(this->reports().size(), 1u) << "an empty unload reports nothing";
}

// Reloading with a smaller budget unloads down to it, and reports what left.
TYPED_TEST_P(ledger_conformance, a_smaller_budget_unloads_down_to_it_and_reports_the_rest) {
  orch_ledger_model* m = this->model(4 * GiB);
  ASSERT_EQ(this->load(m), 4 * GiB);
  EXPECT_EQ(this->load(m, static_cast<double>(1 * GiB)), 1 * GiB);
  EXPECT_EQ(this->info(m).offloaded, 3 * GiB);
  EXPECT_EQ(this->stats().loaded_bytes, 1 * GiB);
  EXPECT_EQ(this->reported_bytes(), 3 * GiB);
}

// A load that does not fit evicts other models whole (never the one being loaded), counts each
// eviction and reports every byte that left.
TYPED_TEST_P(ledger_conformance, a_load_that_does_not_fit_evicts_whole_models_and_reports_them) {
  orch_ledger_model* a = this->model(6 * GiB);
  orch_ledger_model* b = this->model(6 * GiB);
  ASSERT_EQ(this->load(a), 6 * GiB);
  EXPECT_EQ(this->load(b), 6 * GiB);
  EXPECT_EQ(this->info(a).loaded, 0u) << "evicted whole, not trimmed";
  EXPECT_EQ(this->info(a).position, -1);
  const orch_ledger_stats s = this->stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.evicted_bytes, 6 * GiB);
  EXPECT_EQ(s.loaded_bytes, 6 * GiB);
  EXPECT_EQ(this->reported_bytes(), 6 * GiB);
}

// What does not fit even after every other model is evicted stays offloaded: the books never
// exceed the budget.
TYPED_TEST_P(ledger_conformance, the_loaded_total_never_exceeds_the_budget) {
  orch_ledger_model* a = this->model(4 * GiB);
  orch_ledger_model* big = this->model(16 * GiB);
  ASSERT_EQ(this->load(a), 4 * GiB);
  EXPECT_EQ(this->load(big), 10 * GiB);
  EXPECT_EQ(this->info(big).offloaded, 6 * GiB);
  EXPECT_EQ(this->stats().loaded_bytes, 10 * GiB);
  ASSERT_EQ(this->api_->set_budget(this->ledger_, 2 * GiB), ORCH_OK);
  orch_ledger_model* c = this->model(1 * GiB);
  EXPECT_EQ(this->load(c), 1 * GiB);  // the smaller budget holds from the next load on
  EXPECT_LE(this->stats().loaded_bytes, 2 * GiB);
  EXPECT_EQ(this->reported_bytes(), 4 * GiB + 10 * GiB);
}

TYPED_TEST_P(ledger_conformance, free_memory_frees_the_bytes_or_says_it_could_not) {
  orch_ledger_model* a = this->model(4 * GiB);
  orch_ledger_model* b = this->model(4 * GiB);
  ASSERT_EQ(this->load(a), 4 * GiB);
  ASSERT_EQ(this->load(b), 4 * GiB);
  uint64_t freed = 0;
  ASSERT_EQ(this->api_->free_memory(this->ledger_, 5 * GiB, &freed), ORCH_OK);
  EXPECT_EQ(freed, 4 * GiB) << "whole models, just enough of them";
  EXPECT_EQ(this->stats().loaded_bytes, 4 * GiB);
  EXPECT_EQ(this->api_->free_memory(this->ledger_, 11 * GiB, &freed), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(freed, 4 * GiB);
  EXPECT_EQ(this->stats().loaded_bytes, 0u) << "everything went before it gave up";
  EXPECT_EQ(this->stats().evictions, 2u);
  EXPECT_EQ(this->reported_bytes(), 8 * GiB);
}

// A removed model gives its bytes back and its handle is refused from then on.
TYPED_TEST_P(ledger_conformance, a_removed_model_gives_back_its_bytes_and_is_refused) {
  orch_ledger_model* m = this->model(3 * GiB);
  ASSERT_EQ(this->load(m), 3 * GiB);
  this->api_->model_remove(m);
  EXPECT_EQ(this->stats().loaded_bytes, 0u);
  EXPECT_EQ(this->reported_bytes(), 3 * GiB);
  orch_ledger_model_info i{};
  i.struct_size = sizeof i;
  EXPECT_EQ(this->api_->model_info(m, &i), ORCH_INVALID);
  EXPECT_EQ(this->api_->model_load(m, 0.0, nullptr), ORCH_INVALID);
  this->api_->model_remove(m);  // a second remove is harmless
}

// A closed ledger's handle, and its models' handles, are refused; closing twice is harmless.
TYPED_TEST_P(ledger_conformance, a_closed_ledger_and_its_models_are_refused) {
  orch_ledger* l = this->open_ledger(4 * GiB);
  orch_ledger_model* m = this->model(1 * GiB, l);
  this->api_->close(l);
  EXPECT_EQ(this->api_->set_budget(l, 1 * GiB), ORCH_INVALID);
  EXPECT_EQ(this->api_->model_load(m, 0.0, nullptr), ORCH_INVALID);
  orch_ledger_model* added = nullptr;
  EXPECT_EQ(this->api_->model_add(l, 1 * GiB, &added), ORCH_INVALID);
  this->api_->close(l);
}

TYPED_TEST_P(ledger_conformance, two_ledgers_keep_separate_books) {
  orch_ledger* other = this->open_ledger(8 * GiB);
  orch_ledger_model* a = this->model(8 * GiB);
  orch_ledger_model* b = this->model(8 * GiB, other);
  EXPECT_EQ(this->load(a), 8 * GiB);
  EXPECT_EQ(this->load(b), 8 * GiB);
  EXPECT_EQ(this->info(a).loaded, 8 * GiB) << "a load in one ledger evicts nothing in another";
  EXPECT_EQ(this->stats().loaded_bytes, 8 * GiB);
  EXPECT_EQ(this->stats(other).loaded_bytes, 8 * GiB);
  EXPECT_EQ(this->stats().loads, 1u);
  this->api_->close(other);
  EXPECT_EQ(this->info(a).loaded, 8 * GiB);
}

TYPED_TEST_P(ledger_conformance, invalid_arguments_are_refused) {
  const orch_ledger_api* api = this->api_;
  orch_ledger_config c{};
  orch_ledger* l = nullptr;
  c.budget = 1 * GiB;
  EXPECT_EQ(api->open(&c, &l), ORCH_INVALID) << "struct_size 0";
  c.struct_size = sizeof c;
  EXPECT_EQ(api->open(nullptr, &l), ORCH_INVALID);
  EXPECT_EQ(api->open(&c, nullptr), ORCH_INVALID);

  orch_ledger_model* m = nullptr;
  EXPECT_EQ(api->model_add(this->ledger_, 0, &m), ORCH_INVALID) << "an empty model";
  EXPECT_EQ(api->model_add(this->ledger_, 1 * GiB, nullptr), ORCH_INVALID);
  EXPECT_EQ(api->model_add(nullptr, 1 * GiB, &m), ORCH_INVALID);

  m = this->model(1 * GiB);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()})
    EXPECT_EQ(api->model_load(m, bad, nullptr), ORCH_INVALID) << bad;
  EXPECT_EQ(this->info(m).position, -1) << "a refused load changes nothing";
  EXPECT_EQ(this->stats().loads, 0u);

  orch_ledger_model_info i{};
  EXPECT_EQ(api->model_info(m, &i), ORCH_INVALID) << "struct_size 0";
  EXPECT_EQ(api->model_info(m, nullptr), ORCH_INVALID);
  orch_ledger_stats s{};
  EXPECT_EQ(api->stats(this->ledger_, &s), ORCH_INVALID) << "struct_size 0";
  EXPECT_EQ(api->stats(this->ledger_, nullptr), ORCH_INVALID);

  // Null handles are refused, never dereferenced.
  uint64_t bytes = 0;
  i.struct_size = sizeof i;
  s.struct_size = sizeof s;
  EXPECT_EQ(api->set_budget(nullptr, 1 * GiB), ORCH_INVALID);
  EXPECT_EQ(api->model_set_refcount(nullptr, 2), ORCH_INVALID);
  EXPECT_EQ(api->model_load(nullptr, 0.0, &bytes), ORCH_INVALID);
  EXPECT_EQ(api->model_unload(nullptr, &bytes), ORCH_INVALID);
  EXPECT_EQ(api->model_info(nullptr, &i), ORCH_INVALID);
  EXPECT_EQ(api->free_memory(nullptr, 1 * GiB, &bytes), ORCH_INVALID);
  EXPECT_EQ(api->stats(nullptr, &s), ORCH_INVALID);
  api->model_remove(nullptr);
  api->close(nullptr);
}

REGISTER_TYPED_TEST_SUITE_P(ledger_conformance,
                            is_a_pager_kind_plugin_for_its_backend_at_every_level,
                            init_is_idempotent_and_shutdown_may_repeat,
                            handles_from_before_a_shutdown_are_refused,
                            loads_are_accounted_against_the_budget,
                            unload_frees_what_was_loaded_and_reports_it,
                            a_smaller_budget_unloads_down_to_it_and_reports_the_rest,
                            a_load_that_does_not_fit_evicts_whole_models_and_reports_them,
                            the_loaded_total_never_exceeds_the_budget,
                            free_memory_frees_the_bytes_or_says_it_could_not,
                            a_removed_model_gives_back_its_bytes_and_is_refused,
                            a_closed_ledger_and_its_models_are_refused,
                            two_ledgers_keep_separate_books, invalid_arguments_are_refused);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, ledger_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cpu, ledger_conformance, cpu_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, ledger_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, ledger_conformance, hip_target);

}  // namespace
}  // namespace orch::test
