// The backend conformance suite: the driver primitives every backend provides (reference
// §6.2), and, for sim, the simulation controls of DESIGN.md §4.8. Instantiated for sim and cpu
// always, cuda and hip where a device exists.
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <filesystem>

#include "../../plugins/src/backends/sim_segment.hpp"  // the frozen shared layout
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

#define ORCH_REQUIRE_SIM() \
  if (!this->env_.is_sim()) GTEST_SKIP() << "needs the sim device's controls"

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

TYPED_TEST_P(backend_conformance, sim_reports_the_runtime_version_it_was_created_with) {
  ORCH_REQUIRE_SIM();
  orch_sim_config c{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 64 * MiB, 2 * MiB, 0,
                    12u << 16 | 10u};
  int32_t fd = -1;
  ASSERT_EQ(this->env_.sim()->create(&c, &fd), ORCH_OK);
  orch_device_config dc{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  ASSERT_EQ(this->be_->device_open(&dc, &d), ORCH_OK);
  uint32_t major = 0;
  uint32_t minor = 0;
  EXPECT_EQ(this->be_->runtime_version(d, &major, &minor), ORCH_OK);
  EXPECT_EQ(major, 12u);
  EXPECT_EQ(minor, 10u);
  this->be_->device_close(d);
  ::close(fd);
}

TYPED_TEST_P(backend_conformance, sim_free_memory_follows_usage_in_device_mode) {
  ORCH_REQUIRE_SIM();
  uint64_t before = 0;
  ASSERT_EQ(this->be_->mem_get_info(this->dev_, &before, nullptr), ORCH_OK);
  EXPECT_EQ(before, 256 * MiB);
  uint64_t handle = 0;
  const uint64_t va = this->commit(&handle);
  ASSERT_EQ(this->env_.sim()->set_other_usage(this->dev_, 10 * MiB), ORCH_OK);
  uint64_t after = 0;
  ASSERT_EQ(this->be_->mem_get_info(this->dev_, &after, nullptr), ORCH_OK);
  EXPECT_EQ(after, 256 * MiB - this->gran_ - 10 * MiB);
  this->decommit(va, handle);
}

TYPED_TEST_P(backend_conformance, sim_process_mode_reports_the_callers_own_budget) {
  ORCH_REQUIRE_SIM();
  device_env wddm;
  ASSERT_EQ(wddm.open(TypeParam::get(), 256 * MiB, ORCH_SIM_FREE_PROCESS), "");
  const orch_sim_api* sim = wddm.sim();
  ASSERT_EQ(sim->set_other_usage(wddm.control(), 100 * MiB), ORCH_OK);
  ASSERT_EQ(sim->set_process_budget(wddm.control(), 64 * MiB), ORCH_OK);
  uint64_t free_bytes = 0;
  uint64_t total = 0;
  ASSERT_EQ(wddm.backend()->mem_get_info(wddm.control(), &free_bytes, &total), ORCH_OK);
  EXPECT_EQ(total, 64 * MiB);
  EXPECT_EQ(free_bytes, 64 * MiB);  // the other usage is invisible in process mode
}

TYPED_TEST_P(backend_conformance, sim_capacity_is_enforced_with_oom_retryable) {
  ORCH_REQUIRE_SIM();
  uint64_t a = 0;
  uint64_t b = 0;
  ASSERT_EQ(this->be_->phys_create(this->dev_, 200 * MiB, &a), ORCH_OK);
  EXPECT_EQ(this->be_->phys_create(this->dev_, 64 * MiB, &b), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(this->be_->phys_release(this->dev_, a), ORCH_OK);
  EXPECT_EQ(this->be_->phys_create(this->dev_, 64 * MiB, &b), ORCH_OK);
  EXPECT_EQ(this->be_->phys_release(this->dev_, b), ORCH_OK);
}

TYPED_TEST_P(backend_conformance, sim_injected_faults_fire_the_given_number_of_times) {
  ORCH_REQUIRE_SIM();
  const orch_sim_api* sim = this->env_.sim();
  uint64_t h = 0;
  uint64_t va = 0;
  uint64_t free_bytes = 0;
  ASSERT_EQ(sim->inject_fault(this->dev_, ORCH_SIM_FAULT_CREATE_OOM, 2), ORCH_OK);
  EXPECT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(this->dev_, ORCH_SIM_FAULT_DEVICE_ERROR, 1), ORCH_OK);
  uint64_t h2 = 0;
  EXPECT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h2), ORCH_DEVICE_ERROR);
  ASSERT_EQ(this->be_->va_reserve(this->dev_, this->gran_, &va), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(this->dev_, ORCH_SIM_FAULT_MAP, 1), ORCH_OK);
  EXPECT_EQ(this->be_->map(this->dev_, va, this->gran_, h), ORCH_DEVICE_ERROR);
  EXPECT_EQ(this->be_->map(this->dev_, va, this->gran_, h), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(this->dev_, ORCH_SIM_FAULT_POLL, ORCH_SIM_FAULT_ALWAYS), ORCH_OK);
  EXPECT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_DEVICE_ERROR);
  EXPECT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_DEVICE_ERROR);
  ASSERT_EQ(sim->inject_fault(this->dev_, ORCH_SIM_FAULT_POLL, 0), ORCH_OK);
  EXPECT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_OK);
  this->decommit(va, h);
}

TYPED_TEST_P(backend_conformance, sim_counters_count_every_primitive) {
  ORCH_REQUIRE_SIM();
  const orch_sim_counters before = this->env_.counters();
  uint64_t h = 0;
  const uint64_t va = this->commit(&h);
  EXPECT_EQ(this->be_->synchronize(this->dev_), ORCH_OK);
  uint64_t free_bytes = 0;
  EXPECT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_OK);
  this->decommit(va, h);
  const orch_sim_counters after = this->env_.counters();
  EXPECT_EQ(after.creates - before.creates, 1u);
  EXPECT_EQ(after.releases - before.releases, 1u);
  EXPECT_EQ(after.maps - before.maps, 1u);
  EXPECT_EQ(after.unmaps - before.unmaps, 1u);
  EXPECT_EQ(after.syncs - before.syncs, 1u);
  EXPECT_EQ(after.polls - before.polls, 1u);
  EXPECT_EQ(after.used_bytes, 0u);
}

TYPED_TEST_P(backend_conformance, sim_counts_host_registrations_and_refuses_misuse) {
  ORCH_REQUIRE_SIM();
  std::vector<unsigned char> host(1 << 20);
  const orch_sim_counters before = this->env_.counters();
  ASSERT_EQ(this->be_->host_register(this->dev_, host.data(), host.size()), ORCH_OK);
  orch_sim_counters mid = this->env_.counters();
  EXPECT_EQ(mid.host_registrations - before.host_registrations, 1u);
  EXPECT_EQ(mid.process_registered_bytes - before.process_registered_bytes, host.size());
  EXPECT_EQ(mid.registered_bytes - before.registered_bytes, host.size());
  // The driver refuses a range registered twice, or overlapping one, and an unknown start.
  EXPECT_EQ(this->be_->host_register(this->dev_, host.data(), host.size()), ORCH_INVALID);
  EXPECT_EQ(this->be_->host_register(this->dev_, host.data() + 4096, 4096), ORCH_INVALID);
  EXPECT_EQ(this->be_->host_unregister(this->dev_, host.data() + 4096), ORCH_INVALID);
  mid = this->env_.counters();
  EXPECT_EQ(mid.host_registrations - before.host_registrations, 1u);
  ASSERT_EQ(this->be_->host_unregister(this->dev_, host.data()), ORCH_OK);
  const orch_sim_counters after = this->env_.counters();
  EXPECT_EQ(after.host_unregistrations - before.host_unregistrations, 1u);
  EXPECT_EQ(after.process_registered_bytes, before.process_registered_bytes);
  EXPECT_EQ(this->be_->host_unregister(this->dev_, host.data()), ORCH_INVALID);
}

TYPED_TEST_P(backend_conformance, sim_counters_answer_a_caller_built_before_the_appended_fields) {
  ORCH_REQUIRE_SIM();
  const auto* sim = this->env_.sim();
  orch_sim_counters c{};
  std::memset(&c, 0x5a, sizeof c);
  c.struct_size = offsetof(orch_sim_counters, host_registrations);
  ASSERT_EQ(sim->counters(this->dev_, &c), ORCH_OK);
  EXPECT_EQ(c.host_registrations, 0x5a5a5a5a5a5a5a5aull) << "wrote past the caller's struct";
  c.struct_size = offsetof(orch_sim_counters, other_bytes);
  EXPECT_EQ(sim->counters(this->dev_, &c), ORCH_INVALID);
}

TYPED_TEST_P(backend_conformance, sim_backing_store_is_poisoned_when_contents_are_lost) {
  ORCH_REQUIRE_SIM();
  device_env backed;
  ASSERT_EQ(backed.open(TypeParam::get(), 64 * MiB, ORCH_SIM_FREE_DEVICE, true), "");
  const orch_backend_api* be = backed.backend();
  orch_device* d = backed.control();
  uint64_t va = 0;
  uint64_t h = 0;
  ASSERT_EQ(be->va_reserve(d, 2 * MiB, &va), ORCH_OK);
  ASSERT_EQ(be->phys_create(d, 2 * MiB, &h), ORCH_OK);
  ASSERT_EQ(be->map(d, va, 2 * MiB, h), ORCH_OK);
  auto* p = static_cast<unsigned char*>(be->host_pointer(d, va + 4096));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[0], ORCH_SIM_POISON);  // fresh memory is garbage
  std::memset(p, 0x3C, 4096);
  ASSERT_EQ(be->unmap(d, va, 2 * MiB), ORCH_OK);
  ASSERT_EQ(be->phys_release(d, h), ORCH_OK);
  EXPECT_EQ(be->host_pointer(d, va + 4096), nullptr);  // unmapped
  ASSERT_EQ(be->phys_create(d, 2 * MiB, &h), ORCH_OK);
  ASSERT_EQ(be->map(d, va, 2 * MiB, h), ORCH_OK);
  p = static_cast<unsigned char*>(be->host_pointer(d, va + 4096));
  EXPECT_EQ(p[0], ORCH_SIM_POISON);  // a re-created page never shows the old contents
  ASSERT_EQ(be->unmap(d, va, 2 * MiB), ORCH_OK);
  ASSERT_EQ(be->phys_release(d, h), ORCH_OK);
}

TYPED_TEST_P(backend_conformance, sim_clock_is_injectable) {
  ORCH_REQUIRE_SIM();
  const orch_sim_api* sim = this->env_.sim();
  EXPECT_EQ(sim->advance_clock(this->dev_, 1), ORCH_INVALID);  // not frozen yet
  ASSERT_EQ(sim->set_clock(this->dev_, 5000), ORCH_OK);
  EXPECT_EQ(this->be_->now_ns(this->dev_), 5000u);
  ASSERT_EQ(sim->advance_clock(this->dev_, 2500), ORCH_OK);
  EXPECT_EQ(this->be_->now_ns(this->dev_), 7500u);
}

TYPED_TEST_P(backend_conformance, sim_rejects_a_segment_that_is_not_a_device) {
  ORCH_REQUIRE_SIM();
  const int fd = memfd_create("not-a-device", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  orch_device_config c{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID);
  c.sim_fd = -1;
  EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID);
  ::close(fd);
}

// The segment as any attached process sees it: writable by all of them.
orch::plugin_detail::sim_segment* map_segment(int fd) {
  void* p = mmap(nullptr, sizeof(orch::plugin_detail::sim_segment), PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<orch::plugin_detail::sim_segment*>(p);
}

TYPED_TEST_P(backend_conformance, sim_open_refuses_a_segment_with_a_corrupt_configuration) {
  ORCH_REQUIRE_SIM();
  auto* seg = map_segment(this->env_.fd());
  ASSERT_NE(seg, nullptr);
  orch_device_config c{sizeof(orch_device_config), 0, this->env_.fd(), 0};
  orch_device* d = nullptr;
  const auto saved_gran = seg->granularity;
  const auto saved_capacity = seg->capacity;
  const auto saved_mode = seg->free_mode;
  for (uint64_t bad : {uint64_t{0}, uint64_t{3}, 3 * MiB}) {
    seg->granularity = bad;
    EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID) << "granularity " << bad;
  }
  seg->granularity = saved_gran;
  seg->capacity = 0;
  EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID);
  seg->capacity = saved_capacity;
  seg->free_mode = 7;
  EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID);
  seg->free_mode = saved_mode;
  const auto saved_runtime = seg->runtime_version;
  seg->runtime_version = 0;
  EXPECT_EQ(this->be_->device_open(&c, &d), ORCH_INVALID);
  seg->runtime_version = saved_runtime;
  munmap(seg, sizeof *seg);
}

TYPED_TEST_P(backend_conformance, sim_calls_stay_safe_when_the_segment_is_corrupted_after_open) {
  ORCH_REQUIRE_SIM();
  auto* seg = map_segment(this->env_.fd());
  ASSERT_NE(seg, nullptr);
  const auto saved_gran = seg->granularity;
  const auto saved_capacity = seg->capacity;
  seg->granularity = 0;   // would divide by zero if re-read
  seg->capacity = ~0ull;  // would lift the limit if re-read
  uint64_t va = 0;
  uint64_t h = 0;
  EXPECT_EQ(this->be_->va_reserve(this->dev_, 1, &va), ORCH_OK);
  EXPECT_EQ(this->be_->phys_create(this->dev_, 512 * MiB, &h), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h), ORCH_OK);
  EXPECT_EQ(this->be_->phys_release(this->dev_, h), ORCH_OK);
  uint64_t bytes = 0;
  EXPECT_EQ(this->be_->granularity(this->dev_, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, this->gran_);
  EXPECT_EQ(this->be_->device_total_mem(this->dev_, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, 256 * MiB);
  seg->granularity = saved_gran;
  seg->capacity = saved_capacity;
  munmap(seg, sizeof *seg);
}

TYPED_TEST_P(backend_conformance, sim_other_usage_near_the_maximum_refuses_every_allocation) {
  ORCH_REQUIRE_SIM();
  const orch_sim_api* sim = this->env_.sim();
  uint64_t h = 0;
  uint64_t free_bytes = 1;
  for (uint64_t other : {~0ull, ~0ull - 64 * MiB, ~0ull - 512 * MiB}) {
    ASSERT_EQ(sim->set_other_usage(this->dev_, other), ORCH_OK);
    EXPECT_EQ(this->be_->phys_create(this->dev_, this->gran_, &h), ORCH_OOM_RETRYABLE) << other;
    EXPECT_EQ(this->be_->mem_get_info(this->dev_, &free_bytes, nullptr), ORCH_OK);
    EXPECT_EQ(free_bytes, 0u);
  }
  ASSERT_EQ(sim->set_other_usage(this->dev_, 0), ORCH_OK);
  // Sizes whose rounding would wrap are refused, not wrapped.
  uint64_t va = 0;
  EXPECT_EQ(this->be_->va_reserve(this->dev_, ~0ull, &va), ORCH_INVALID);
  EXPECT_EQ(this->be_->phys_create(this->dev_, ~0ull / this->gran_ * this->gran_, &h),
            ORCH_OOM_RETRYABLE);
}

TYPED_TEST_P(backend_conformance, sim_leaves_nothing_in_dev_shm) {
  ORCH_REQUIRE_SIM();
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec))
    EXPECT_EQ(e.path().filename().string().find("orch"), std::string::npos) << e.path();
}

REGISTER_TYPED_TEST_SUITE_P(backend_conformance,
                            reports_a_device_with_memory_and_a_power_of_two_granularity,
                            reserve_create_map_round_trip, host_register_round_trip,
                            invalid_arguments_answer_invalid,
                            reports_its_runtime_version_or_has_none,
                            sim_reports_the_runtime_version_it_was_created_with,
                            sim_free_memory_follows_usage_in_device_mode,
                            sim_process_mode_reports_the_callers_own_budget,
                            sim_capacity_is_enforced_with_oom_retryable,
                            sim_injected_faults_fire_the_given_number_of_times,
                            sim_counters_count_every_primitive,
                            sim_counts_host_registrations_and_refuses_misuse,
                            sim_counters_answer_a_caller_built_before_the_appended_fields,
                            sim_backing_store_is_poisoned_when_contents_are_lost,
                            sim_clock_is_injectable, sim_rejects_a_segment_that_is_not_a_device,
                            sim_open_refuses_a_segment_with_a_corrupt_configuration,
                            sim_calls_stay_safe_when_the_segment_is_corrupted_after_open,
                            sim_other_usage_near_the_maximum_refuses_every_allocation,
                            sim_leaves_nothing_in_dev_shm);

INSTANTIATE_TYPED_TEST_SUITE_P(sim, backend_conformance, sim_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cpu, backend_conformance, cpu_target);
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, backend_conformance, cuda_target);
INSTANTIATE_TYPED_TEST_SUITE_P(hip, backend_conformance, hip_target);

}  // namespace
}  // namespace orch::test
