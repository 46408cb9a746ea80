// The backend conformance suite: the driver primitives all backends provide (docs/references.md,
// aimdo §6.2). Instantiated for sim and cpu always, cuda and hip where a device exists. The sim's
// own controls (docs/sim-device.md) are tested once, on sim only, in test_sim_backend.cpp.
#include <string>
#include <vector>

#include "targets.hpp"

namespace orch::test {
namespace {

template <typename Target>
class backend_conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = env_.open(Target::get(), 256 * MiB);
    if (!skip.empty()) GTEST_SKIP() << skip;
    be_ = env_.backend();
    if (env_.is_sim()) {
      dev_ = env_.control();
    } else {
      orch_device_config c{sizeof(orch_device_config), 0, -1, 0};
      ASSERT_EQ(be_->device_open(&c, &owned_), ORCH_OK);
      dev_ = owned_;
    }
    ASSERT_EQ(be_->granularity(dev_, &gran_), ORCH_OK);
  }
  void TearDown() override {
    if (owned_ != nullptr) be_->device_close(owned_);
  }

  // reserve + create + map one granule; returns the va (0 on failure).
  uint64_t commit(uint64_t* handle) {
    uint64_t va = 0;
    EXPECT_EQ(be_->va_reserve(dev_, gran_, &va), ORCH_OK);
    EXPECT_EQ(be_->phys_create(dev_, gran_, handle), ORCH_OK);
    EXPECT_EQ(be_->map(dev_, va, gran_, *handle), ORCH_OK);
    return va;
  }
  void decommit(uint64_t va, uint64_t handle) {
    EXPECT_EQ(be_->unmap(dev_, va, gran_), ORCH_OK);
    EXPECT_EQ(be_->phys_release(dev_, handle), ORCH_OK);
    EXPECT_EQ(be_->va_free(dev_, va, gran_), ORCH_OK);
  }

  device_env env_;
  const orch_backend_api* be_ = nullptr;
  orch_device* dev_ = nullptr;
  orch_device* owned_ = nullptr;
  uint64_t gran_ = 0;
};

TYPED_TEST_SUITE_P(backend_conformance);

TYPED_TEST_P(backend_conformance, reports_a_device_with_memory_and_a_power_of_two_granularity) {
  int32_t count = 0;
  ASSERT_EQ(this->be_->device_count(&count), ORCH_OK);
  EXPECT_GE(count, 1);
  uint64_t total = 0;
  ASSERT_EQ(this->be_->device_total_mem(this->dev_, &total), ORCH_OK);
  EXPECT_GT(total, 0u);
  EXPECT_GT(this->gran_, 0u);
  EXPECT_EQ(this->gran_ & (this->gran_ - 1), 0u);
  uint64_t free_bytes = 0;
  ASSERT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_OK);
  EXPECT_LE(free_bytes, total);
}

TYPED_TEST_P(backend_conformance, reserve_create_map_round_trip) {
  uint64_t handle = 0;
  const uint64_t va = this->commit(&handle);
  EXPECT_NE(va, 0u);
  EXPECT_EQ(this->be_->synchronize(this->dev_), ORCH_OK);
  this->decommit(va, handle);
}

TYPED_TEST_P(backend_conformance, host_register_round_trip) {
  std::vector<unsigned char> host(1 << 20);
  EXPECT_EQ(this->be_->host_register(this->dev_, host.data(), host.size()), ORCH_OK);
  EXPECT_EQ(this->be_->host_unregister(this->dev_, host.data()), ORCH_OK);
}

TYPED_TEST_P(backend_conformance, invalid_arguments_answer_invalid) {
  uint64_t handle = 0;
  EXPECT_EQ(this->be_->phys_create(this->dev_, 0, &handle), ORCH_INVALID);
  EXPECT_EQ(this->be_->va_reserve(this->dev_, 0, &handle), ORCH_INVALID);
  EXPECT_EQ(this->be_->device_total_mem(this->dev_, nullptr), ORCH_INVALID);
}

TYPED_TEST_P(backend_conformance, reports_its_runtime_version_or_has_none) {
  const auto* be = this->be_;
  if (be->runtime_version == nullptr) {
    EXPECT_EQ(std::string(this->env_.name()), "cpu") << "only cpu has no versioned runtime";
    return;
  }
  uint32_t major = 0;
  uint32_t minor = 0;
  ASSERT_EQ(be->runtime_version(this->dev_, &major, &minor), ORCH_OK);
  EXPECT_GT(major * 65536ull + minor, 0u) << "a runtime reports a version above 0.0";
  if (this->env_.is_sim()) {
    EXPECT_EQ(major, 1u) << "a sim device created without one reports 1.0";
    EXPECT_EQ(minor, 0u);
  }
  EXPECT_EQ(be->runtime_version(this->dev_, nullptr, &minor), ORCH_INVALID);
  EXPECT_EQ(be->runtime_version(this->dev_, &major, nullptr), ORCH_INVALID);
}

REGISTER_TYPED_TEST_SUITE_P(backend_conformance,
                            reports_a_device_with_memory_and_a_power_of_two_granularity,
                            reserve_create_map_round_trip, host_register_round_trip,
                            invalid_arguments_answer_invalid,
                            reports_its_runtime_version_or_has_none);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, backend_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cpu, backend_conformance, cpu_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, backend_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, backend_conformance, hip_target);

}  // namespace
}  // namespace orch::test
