// The allocator conformance suite: the torch pluggable-allocator exports, for every backend (sim
// and cpu always, cuda and hip where a device exists); cast buffers on a device's offload streams
// (grow-only in chunks, reclaiming through the pager first), for the device backends; cpu's
// per-call buffer, for cpu. Each backend runs only the cases that apply to it, so a skip here
// always means a missing device.
#include <sys/types.h>

#include "targets.hpp"

namespace orch::test {
namespace {

template <typename Target>
class allocator_conformance : public ::testing::Test {
 protected:
  void SetUp() override { start(); }

  void start(uint64_t chunk = 0, uint64_t reserve = 0) {
    const target t = Target::get();
    if (t.allocator_plugin == nullptr) GTEST_SKIP() << t.name << " allocator is not built here";
    if (t.backend != ORCH_BACKEND_CPU) {
      env_ = std::make_unique<device_env>();
      std::string skip = env_->open(t, 1 * GiB);
      if (skip.empty() && whole_device_) skip = env_->size_to_capacity();
      if (!skip.empty()) GTEST_SKIP() << skip;
      pager_lib_ = load(t.pager_plugin);
      ASSERT_NE(pager_lib_, nullptr);
      pager_api_ = pager_lib_->table().pager_api;
      orch_pager_config c = pager_config(*env_);
      ASSERT_EQ(pager_api_->device_open(&c, &pager_), ORCH_OK);
    }
    lib_ = load(t.allocator_plugin);
    ASSERT_NE(lib_, nullptr);
    api_ = lib_->table().allocator_api;
    orch_allocator_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.streams = ORCH_ALLOC_STREAMS_DEFAULT;
    c.chunk_size = chunk;
    c.reserve_size = reserve;
    c.pager_api = pager_api_;
    c.pager = pager_;
    ASSERT_EQ(api_->open(&c, &alloc_), ORCH_OK);
  }

  void TearDown() override {
    if (lib_ != nullptr) lib_->shutdown();
    lib_.reset();
    if (pager_lib_ != nullptr) pager_lib_->shutdown();
    pager_lib_.reset();
    env_.reset();
  }

  bool on_cpu() const { return Target::get().backend == ORCH_BACKEND_CPU; }

  orch_cast_stats stats() {
    orch_cast_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(api_->cast_stats(alloc_, &s), ORCH_OK);
    return s;
  }

  uint64_t external() {
    orch_pager_usage u{};
    u.struct_size = sizeof u;
    EXPECT_EQ(pager_api_->usage(pager_, &u), ORCH_OK);
    return u.external_bytes;
  }

  bool whole_device_ = false;  // the device is exactly the scenario's 1 GiB (size_to_capacity)
  std::unique_ptr<device_env> env_;
  std::unique_ptr<plugins::plugin_library> pager_lib_;
  std::unique_ptr<plugins::plugin_library> lib_;
  const orch_pager_api* pager_api_ = nullptr;
  orch_pager* pager_ = nullptr;
  const orch_allocator_api* api_ = nullptr;
  orch_allocator* alloc_ = nullptr;
};

TYPED_TEST_SUITE_P(allocator_conformance);

TYPED_TEST_P(allocator_conformance, two_streams_on_devices_none_on_cpu) {
  EXPECT_EQ(this->stats().streams, this->on_cpu() ? 0u : 2u);
}

TYPED_TEST_P(allocator_conformance, torch_exports_allocate_and_free_through_the_budget) {
  using malloc_fn = void* (*)(ssize_t, int, void*);
  using free_fn = void (*)(void*, ssize_t, int, void*);
  auto m = reinterpret_cast<malloc_fn>(this->lib_->symbol("orch_torch_malloc"));
  auto f = reinterpret_cast<free_fn>(this->lib_->symbol("orch_torch_free"));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(f, nullptr);
  void* p = m(5 * MiB, 0, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(m(5 * MiB, 7, nullptr), nullptr);  // no allocator open for device 7
  if (!this->on_cpu()) {
    EXPECT_EQ(this->stats().torch_bytes, 6 * MiB);  // rounded to the 2 MiB granularity
    EXPECT_EQ(this->external(), 6 * MiB);
  }
  f(p, 5 * MiB, 0, nullptr);
  if (!this->on_cpu()) {
    EXPECT_EQ(this->stats().torch_bytes, 0u);
    EXPECT_EQ(this->external(), 0u);
  }
}

REGISTER_TYPED_TEST_SUITE_P(allocator_conformance, two_streams_on_devices_none_on_cpu,
                            torch_exports_allocate_and_free_through_the_budget);
INSTANTIATE_TYPED_TEST_SUITE_P(sim, allocator_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cpu, allocator_conformance, cpu_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, allocator_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, allocator_conformance, hip_target);

// Cast buffers, one per offload stream: the device backends.
template <typename Target>
class device_allocator_conformance : public allocator_conformance<Target> {};
TYPED_TEST_SUITE_P(device_allocator_conformance);

TYPED_TEST_P(device_allocator_conformance, cast_buffers_grow_in_16_mib_chunks_at_a_stable_address) {
  uint64_t first = 0;
  uint64_t again = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 20 * MiB, &first), ORCH_OK);
  EXPECT_EQ(this->stats().committed, 32 * MiB);
  EXPECT_EQ(this->stats().grows, 2u);
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 10 * MiB, &again), ORCH_OK);
  EXPECT_EQ(again, first);
  EXPECT_EQ(this->stats().grows, 2u);  // grow-only: a smaller request reuses it
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 40 * MiB, &again), ORCH_OK);
  EXPECT_EQ(again, first);  // VA-stable growth
  EXPECT_EQ(this->stats().committed, 48 * MiB);
  EXPECT_EQ(this->external(), 48 * MiB);  // every chunk is in the pager's budget
}

TYPED_TEST_P(device_allocator_conformance, chunk_size_is_configurable) {
  this->TearDown();
  this->start(2 * MiB);
  ORCH_RETURN_IF_SKIPPED();
  uint64_t address = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 1, 3 * MiB, &address), ORCH_OK);
  EXPECT_EQ(this->stats().committed, 4 * MiB);
}

// Growth reclaims through the pager first: with a region at its 23-page steady state on 1 GiB,
// 64 MiB of cast buffer costs exactly one 32 MiB page (the deficit of the third chunk).
TYPED_TEST_P(device_allocator_conformance, growth_reclaims_through_the_pager_first) {
  orch_region* r = nullptr;
  ASSERT_EQ(this->pager_api_->region_create(this->pager_, 32 * page, &r, nullptr), ORCH_OK);
  for (uint64_t p = 0; p < 32; ++p) {
    if (this->pager_api_->region_fault(r, p * page, page, nullptr, 0, nullptr, nullptr) ==
        ORCH_OK) {
      ASSERT_EQ(this->pager_api_->region_unpin(r, p * page, page), ORCH_OK);
    }
  }
  uint64_t before = 0;
  ASSERT_EQ(this->pager_api_->resident_bytes(this->pager_, &before), ORCH_OK);
  ASSERT_EQ(before, 23 * page);
  uint64_t address = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 64 * MiB, &address), ORCH_OK);
  uint64_t after = 0;
  ASSERT_EQ(this->pager_api_->resident_bytes(this->pager_, &after), ORCH_OK);
  EXPECT_EQ(after, 22 * page);
}

TYPED_TEST_P(device_allocator_conformance, growth_that_cannot_fit_answers_oom_retryable) {
  // The driver's own OOM ends the growth: on a device larger than the scenario's 1 GiB (a card,
  // the driver stand-ins' 8 GiB) the growth would go on past the pager's budget and succeed. So
  // the device is exactly 1 GiB: sim's is, a stand-in is resized to it, a card skips.
  this->TearDown();
  this->whole_device_ = true;
  this->start();
  ORCH_RETURN_IF_SKIPPED();
  uint64_t total = 0;
  const orch_backend_api* backend = this->pager_api_->backend(this->pager_);
  ASSERT_EQ(backend->device_total_mem(this->pager_api_->device(this->pager_), &total), ORCH_OK);
  ASSERT_EQ(total, 1 * GiB);
  orch_region* r = nullptr;
  ASSERT_EQ(this->pager_api_->region_create(this->pager_, 32 * page, &r, nullptr), ORCH_OK);
  for (uint64_t p = 0; p < 23; ++p)  // pinned: nothing can be reclaimed
    ASSERT_EQ(this->pager_api_->region_fault(r, p * page, page, nullptr, 0, nullptr, nullptr),
              ORCH_OK);
  uint64_t address = 0;
  EXPECT_EQ(this->api_->cast_buffer(this->alloc_, 0, 512 * MiB, &address), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(this->stats().committed, 288 * MiB);  // what did fit stays, grow-only
}

// A replaced buffer over 50 MB goes back to the device at once; a smaller one waits for reset.
TYPED_TEST_P(device_allocator_conformance, replaced_buffer_over_50_mb_is_released_at_once) {
  this->TearDown();
  this->start(0, 64 * MiB);  // 64 MiB reservations, so a larger request replaces the buffer
  ORCH_RETURN_IF_SKIPPED();
  uint64_t address = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 60 * MiB, &address), ORCH_OK);
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 100 * MiB, &address), ORCH_OK);
  EXPECT_EQ(this->stats().replaced, 1u);
  EXPECT_EQ(this->stats().retired, 0u);
  EXPECT_EQ(this->external(), 112 * MiB);  // the old 64 MiB is already gone
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 1, 20 * MiB, &address), ORCH_OK);
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 1, 70 * MiB, &address), ORCH_OK);
  EXPECT_EQ(this->stats().replaced, 2u);
  EXPECT_EQ(this->stats().retired, 32 * MiB);  // 32 MiB is under the threshold: kept
  EXPECT_EQ(this->external(), (112 + 80 + 32) * MiB);
}

TYPED_TEST_P(device_allocator_conformance,
             reset_releases_everything_and_keeps_the_high_water_mark) {
  uint64_t address = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 40 * MiB, &address), ORCH_OK);
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 1, 10 * MiB, &address), ORCH_OK);
  EXPECT_EQ(this->stats().committed, 64 * MiB);
  ASSERT_EQ(this->api_->reset_cast_buffers(this->alloc_), ORCH_OK);
  EXPECT_EQ(this->stats().committed, 0u);
  EXPECT_EQ(this->stats().high_water, 64 * MiB);
  // 40 MiB in 16 MiB chunks: the largest one buffer, which bounds the high water per stream.
  EXPECT_EQ(this->stats().largest_buffer, 48 * MiB);
  EXPECT_EQ(this->stats().resets, 1u);
  EXPECT_EQ(this->external(), 0u);
  if (this->env_->has_controls()) {
    EXPECT_EQ(this->env_->counters().process_used_bytes, 0u);
  }
}

// aimdo never refuses torch for budget reasons (aimdo §4.7): it evicts pager pages instead.
TYPED_TEST_P(device_allocator_conformance, torch_malloc_evicts_pager_pages_rather_than_refuse) {
  orch_region* r = nullptr;
  ASSERT_EQ(this->pager_api_->region_create(this->pager_, 32 * page, &r, nullptr), ORCH_OK);
  for (uint64_t p = 0; p < 32; ++p) {
    if (this->pager_api_->region_fault(r, p * page, page, nullptr, 0, nullptr, nullptr) ==
        ORCH_OK) {
      ASSERT_EQ(this->pager_api_->region_unpin(r, p * page, page), ORCH_OK);
    }
  }
  auto m =
      reinterpret_cast<void* (*)(ssize_t, int, void*)>(this->lib_->symbol("orch_torch_malloc"));
  void* p = m(300 * MiB, 0, nullptr);
  ASSERT_NE(p, nullptr);
  uint64_t resident = 0;
  ASSERT_EQ(this->pager_api_->resident_bytes(this->pager_, &resident), ORCH_OK);
  // deficit(300 MiB) = 736 + 300 + 256 - 1024 = 268 MiB: 9 pages go.
  EXPECT_EQ(resident, 14 * page);
}

REGISTER_TYPED_TEST_SUITE_P(device_allocator_conformance,
                            cast_buffers_grow_in_16_mib_chunks_at_a_stable_address,
                            chunk_size_is_configurable, growth_reclaims_through_the_pager_first,
                            growth_that_cannot_fit_answers_oom_retryable,
                            replaced_buffer_over_50_mb_is_released_at_once,
                            reset_releases_everything_and_keeps_the_high_water_mark,
                            torch_malloc_evicts_pager_pages_rather_than_refuse);
INSTANTIATE_TYPED_TEST_SUITE_P(sim, device_allocator_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, device_allocator_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, device_allocator_conformance, hip_target);

using cpu_allocator = allocator_conformance<cpu_target>;

// cpu has no offload stream: its one cast buffer serves the call and is not committed carry; there
// is no stream 1.
TEST_F(cpu_allocator, uses_a_per_call_buffer_that_is_not_carry) {
  uint64_t address = 0;
  ASSERT_EQ(this->api_->cast_buffer(this->alloc_, 0, 1 * MiB, &address), ORCH_OK);
  auto* bytes = reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(address));
  bytes[0] = 1;
  bytes[MiB - 1] = 2;  // writable end to end (ASan checks the bounds)
  EXPECT_EQ(this->stats().committed, 0u);
  EXPECT_EQ(this->api_->cast_buffer(this->alloc_, 1, 1 * MiB, &address), ORCH_INVALID);
}

}  // namespace
}  // namespace orch::test
