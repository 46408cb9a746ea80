// The pager conformance suite (RMM's typed-suite pattern): every pager plugin passes
// the scenarios, at least the 15 of docs/references.md, aimdo §6.7, with the exact numbers of the
// worked table in §5.3 (32 MiB pages, 256 MiB simple headroom). Instantiated for sim always and
// for cuda and hip, which skip where no device exists. Scenarios that need the sim device's
// controls (fault injection, the clock, other-process usage, a second device) run on sim and on
// the driver stand-ins (harness.hpp), and skip on a card; those that need the backing store run
// on sim alone.
//
// This header holds the fixture; the scenarios are split by concept over test_pager_regions.cpp,
// test_pager_eviction.cpp, test_pager_pressure.cpp and test_pager_lifecycle.cpp, all linked into
// test_pager_conformance. The fixture lives outside an anonymous namespace so that it is one
// type in every file: GoogleTest then files each file's tests under the same suite.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "targets.hpp"

namespace orch::test {

template <typename Target>
class pager_conformance : public ::testing::Test {
 protected:
  void SetUp() override { start(1 * GiB); }

  // (Re)starts on a device of `capacity` bytes (on a card or a stand-in, a larger device whose
  // budget is capped at `capacity`).
  void start(uint64_t capacity, uint64_t extra = 0, uint32_t free_mode = ORCH_SIM_FREE_DEVICE,
             bool backing = false) {
    stop();
    env_ = std::make_unique<device_env>();
    std::string skip = env_->open(Target::get(), capacity, free_mode, backing);
    if (skip.empty() && whole_device_) skip = env_->size_to_capacity();
    if (!skip.empty()) GTEST_SKIP() << skip;
    lib_ = load(Target::get().pager_plugin, env_->lent_services());
    ASSERT_NE(lib_, nullptr);
    api_ = lib_->table().pager_api;
    orch_pager_config c = pager_config(*env_);
    c.extra_headroom = extra;
    ASSERT_EQ(api_->device_open(&c, &pager_), ORCH_OK);
  }

  // (Re)starts on a device of exactly `capacity` bytes, for a scenario whose numbers come from
  // what a poll reads free on the device (device_env::size_to_capacity).
  void start_on_whole_device(uint64_t capacity, uint64_t extra = 0) {
    whole_device_ = true;
    start(capacity, extra);
  }

  void stop() {
    if (lib_ != nullptr) {
      lib_->shutdown();  // closes every pager still open
      lib_.reset();
    }
    pager_ = nullptr;
    env_.reset();
  }

  void TearDown() override { stop(); }

  orch_region* region(uint64_t bytes, uint64_t* clamped = nullptr) {
    orch_region* r = nullptr;
    EXPECT_EQ(api_->region_create(pager_, bytes, &r, clamped), ORCH_OK);
    return r;
  }

  orch_status fault(orch_region* r, uint64_t first_page, uint64_t pages,
                    std::vector<uint64_t>* sig = nullptr, uint64_t* newly = nullptr) {
    std::vector<uint64_t> local(pages);
    size_t len = 0;
    const orch_status st = api_->region_fault(r, first_page * page, pages * page, local.data(),
                                              local.size(), &len, newly);
    if (sig != nullptr) *sig = local;
    return st;
  }

  void unpin(orch_region* r, uint64_t first_page, uint64_t pages) {
    ASSERT_EQ(api_->region_unpin(r, first_page * page, pages * page), ORCH_OK);
  }

  // ComfyUI's per-layer loop (aimdo §4.10): fault each weight, run, unpin; a failed fault streams.
  // Returns how many weights faulted OK.
  uint64_t run_model(orch_region* r, uint64_t weights, uint64_t weight_pages) {
    uint64_t ok = 0;
    for (uint64_t w = 0; w < weights; ++w) {
      const orch_status st = fault(r, w * weight_pages, weight_pages);
      EXPECT_TRUE(st == ORCH_OK || st == ORCH_OOM_RETRYABLE) << st;
      if (st == ORCH_OK) {
        ++ok;
        unpin(r, w * weight_pages, weight_pages);
      }
    }
    return ok;
  }

  orch_region_info info(orch_region* r) {
    orch_region_info i{};
    i.struct_size = sizeof i;
    EXPECT_EQ(api_->region_info(r, &i), ORCH_OK);
    return i;
  }

  orch_pager_stats stats() {
    orch_pager_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(api_->stats(pager_, &s), ORCH_OK);
    return s;
  }

  uint64_t resident() {
    uint64_t b = 0;
    EXPECT_EQ(api_->resident_bytes(pager_, &b), ORCH_OK);
    return b;
  }

  bool whole_device_ = false;
  std::unique_ptr<device_env> env_;
  std::unique_ptr<plugins::plugin_library> lib_;
  const orch_pager_api* api_ = nullptr;
  orch_pager* pager_ = nullptr;
};

}  // namespace orch::test
