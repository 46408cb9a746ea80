// The sim backend's own tests: the simulation controls (docs/sim-device.md)
// and the sim's guarantees no real backend shares. What every backend must do is the typed
// suite in test_backend_conformance.cpp; these need the sim's controls or its segment, so they
// run on sim only and are registered once.
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "../../plugins/src/backends/sim_segment.hpp"  // the frozen shared layout
#include "targets.hpp"

namespace orch::test {
namespace {

// A fresh 256 MiB sim device per test, opened through the real loader. The sim plugin is built
// everywhere, so a device that cannot be opened fails the test instead of skipping it.
class sim_backend : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(env_.open(sim_target::get(), 256 * MiB), "");
    be_ = env_.backend();
    dev_ = env_.control();
    ASSERT_EQ(be_->granularity(dev_, &gran_), ORCH_OK);
  }

  // reserve + create + map one granule; returns the va.
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
  uint64_t gran_ = 0;
};

TEST_F(sim_backend, sim_reports_the_runtime_version_it_was_created_with) {
  orch_sim_config c{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 64 * MiB, 2 * MiB, 0,
                    12u << 16 | 10u};
  int32_t fd = -1;
  ASSERT_EQ(env_.sim()->create(&c, &fd), ORCH_OK);
  orch_device_config dc{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  ASSERT_EQ(be_->device_open(&dc, &d), ORCH_OK);
  uint32_t major = 0;
  uint32_t minor = 0;
  EXPECT_EQ(be_->runtime_version(d, &major, &minor), ORCH_OK);
  EXPECT_EQ(major, 12u);
  EXPECT_EQ(minor, 10u);
  be_->device_close(d);
  ::close(fd);
}

TEST_F(sim_backend, sim_free_memory_follows_usage_in_device_mode) {
  uint64_t before = 0;
  ASSERT_EQ(be_->mem_get_info(dev_, &before, nullptr), ORCH_OK);
  EXPECT_EQ(before, 256 * MiB);
  uint64_t handle = 0;
  const uint64_t va = commit(&handle);
  ASSERT_EQ(env_.sim()->set_other_usage(dev_, 10 * MiB), ORCH_OK);
  uint64_t after = 0;
  ASSERT_EQ(be_->mem_get_info(dev_, &after, nullptr), ORCH_OK);
  EXPECT_EQ(after, 256 * MiB - gran_ - 10 * MiB);
  decommit(va, handle);
}

TEST_F(sim_backend, sim_process_mode_reports_the_callers_own_budget) {
  device_env wddm;
  ASSERT_EQ(wddm.open(sim_target::get(), 256 * MiB, ORCH_SIM_FREE_PROCESS), "");
  const orch_sim_api* sim = wddm.sim();
  ASSERT_EQ(sim->set_other_usage(wddm.control(), 100 * MiB), ORCH_OK);
  ASSERT_EQ(sim->set_process_budget(wddm.control(), 64 * MiB), ORCH_OK);
  uint64_t free_bytes = 0;
  uint64_t total = 0;
  ASSERT_EQ(wddm.backend()->mem_get_info(wddm.control(), &free_bytes, &total), ORCH_OK);
  EXPECT_EQ(total, 64 * MiB);
  EXPECT_EQ(free_bytes, 64 * MiB);  // the other usage is invisible in process mode
}

TEST_F(sim_backend, sim_capacity_is_enforced_with_oom_retryable) {
  uint64_t a = 0;
  uint64_t b = 0;
  ASSERT_EQ(be_->phys_create(dev_, 200 * MiB, &a), ORCH_OK);
  EXPECT_EQ(be_->phys_create(dev_, 64 * MiB, &b), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(be_->phys_release(dev_, a), ORCH_OK);
  EXPECT_EQ(be_->phys_create(dev_, 64 * MiB, &b), ORCH_OK);
  EXPECT_EQ(be_->phys_release(dev_, b), ORCH_OK);
}

TEST_F(sim_backend, sim_injected_faults_fire_the_given_number_of_times) {
  const orch_sim_api* sim = env_.sim();
  uint64_t h = 0;
  uint64_t va = 0;
  uint64_t free_bytes = 0;
  ASSERT_EQ(sim->inject_fault(dev_, ORCH_SIM_FAULT_CREATE_OOM, 2), ORCH_OK);
  EXPECT_EQ(be_->phys_create(dev_, gran_, &h), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(be_->phys_create(dev_, gran_, &h), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(be_->phys_create(dev_, gran_, &h), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(dev_, ORCH_SIM_FAULT_DEVICE_ERROR, 1), ORCH_OK);
  uint64_t h2 = 0;
  EXPECT_EQ(be_->phys_create(dev_, gran_, &h2), ORCH_DEVICE_ERROR);
  ASSERT_EQ(be_->va_reserve(dev_, gran_, &va), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(dev_, ORCH_SIM_FAULT_MAP, 1), ORCH_OK);
  EXPECT_EQ(be_->map(dev_, va, gran_, h), ORCH_DEVICE_ERROR);
  EXPECT_EQ(be_->map(dev_, va, gran_, h), ORCH_OK);
  ASSERT_EQ(sim->inject_fault(dev_, ORCH_SIM_FAULT_POLL, ORCH_SIM_FAULT_ALWAYS), ORCH_OK);
  EXPECT_EQ(be_->mem_get_info(dev_, &free_bytes, nullptr), ORCH_DEVICE_ERROR);
  EXPECT_EQ(be_->mem_get_info(dev_, &free_bytes, nullptr), ORCH_DEVICE_ERROR);
  ASSERT_EQ(sim->inject_fault(dev_, ORCH_SIM_FAULT_POLL, 0), ORCH_OK);
  EXPECT_EQ(be_->mem_get_info(dev_, &free_bytes, nullptr), ORCH_OK);
  decommit(va, h);
}

TEST_F(sim_backend, sim_counters_count_every_primitive) {
  const orch_sim_counters before = env_.counters();
  uint64_t h = 0;
  const uint64_t va = commit(&h);
  EXPECT_EQ(be_->synchronize(dev_), ORCH_OK);
  uint64_t free_bytes = 0;
  EXPECT_EQ(be_->mem_get_info(dev_, &free_bytes, nullptr), ORCH_OK);
  decommit(va, h);
  const orch_sim_counters after = env_.counters();
  EXPECT_EQ(after.creates - before.creates, 1u);
  EXPECT_EQ(after.releases - before.releases, 1u);
  EXPECT_EQ(after.maps - before.maps, 1u);
  EXPECT_EQ(after.unmaps - before.unmaps, 1u);
  EXPECT_EQ(after.syncs - before.syncs, 1u);
  EXPECT_EQ(after.polls - before.polls, 1u);
  EXPECT_EQ(after.used_bytes, 0u);
}

TEST_F(sim_backend, sim_counts_host_registrations_and_refuses_misuse) {
  std::vector<unsigned char> host(1 << 20);
  const orch_sim_counters before = env_.counters();
  ASSERT_EQ(be_->host_register(dev_, host.data(), host.size()), ORCH_OK);
  orch_sim_counters mid = env_.counters();
  EXPECT_EQ(mid.host_registrations - before.host_registrations, 1u);
  EXPECT_EQ(mid.process_registered_bytes - before.process_registered_bytes, host.size());
  EXPECT_EQ(mid.registered_bytes - before.registered_bytes, host.size());
  // The driver refuses a range registered twice, or overlapping one, and an unknown start.
  EXPECT_EQ(be_->host_register(dev_, host.data(), host.size()), ORCH_INVALID);
  EXPECT_EQ(be_->host_register(dev_, host.data() + 4096, 4096), ORCH_INVALID);
  EXPECT_EQ(be_->host_unregister(dev_, host.data() + 4096), ORCH_INVALID);
  mid = env_.counters();
  EXPECT_EQ(mid.host_registrations - before.host_registrations, 1u);
  ASSERT_EQ(be_->host_unregister(dev_, host.data()), ORCH_OK);
  const orch_sim_counters after = env_.counters();
  EXPECT_EQ(after.host_unregistrations - before.host_unregistrations, 1u);
  EXPECT_EQ(after.process_registered_bytes, before.process_registered_bytes);
  EXPECT_EQ(be_->host_unregister(dev_, host.data()), ORCH_INVALID);
}

TEST_F(sim_backend, sim_counters_answer_a_caller_built_before_the_appended_fields) {
  const auto* sim = env_.sim();
  orch_sim_counters c{};
  std::memset(&c, 0x5a, sizeof c);
  c.struct_size = offsetof(orch_sim_counters, host_registrations);
  ASSERT_EQ(sim->counters(dev_, &c), ORCH_OK);
  EXPECT_EQ(c.host_registrations, 0x5a5a5a5a5a5a5a5aull) << "wrote past the caller's struct";
  c.struct_size = offsetof(orch_sim_counters, other_bytes);
  EXPECT_EQ(sim->counters(dev_, &c), ORCH_INVALID);
}

TEST_F(sim_backend, sim_backing_store_is_poisoned_when_contents_are_lost) {
  device_env backed;
  ASSERT_EQ(backed.open(sim_target::get(), 64 * MiB, ORCH_SIM_FREE_DEVICE, true), "");
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

TEST_F(sim_backend, sim_clock_is_injectable) {
  const orch_sim_api* sim = env_.sim();
  EXPECT_EQ(sim->advance_clock(dev_, 1), ORCH_INVALID);  // not frozen yet
  ASSERT_EQ(sim->set_clock(dev_, 5000), ORCH_OK);
  EXPECT_EQ(be_->now_ns(dev_), 5000u);
  ASSERT_EQ(sim->advance_clock(dev_, 2500), ORCH_OK);
  EXPECT_EQ(be_->now_ns(dev_), 7500u);
}

TEST_F(sim_backend, sim_rejects_a_segment_that_is_not_a_device) {
  const int fd = memfd_create("not-a-device", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  orch_device_config c{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID);
  c.sim_fd = -1;
  EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID);
  ::close(fd);
}

// The segment as any attached process sees it: writable by all of them.
orch::plugin_detail::sim_segment* map_segment(int fd) {
  void* p = mmap(nullptr, sizeof(orch::plugin_detail::sim_segment), PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<orch::plugin_detail::sim_segment*>(p);
}

TEST_F(sim_backend, sim_open_refuses_a_segment_with_a_corrupt_configuration) {
  auto* seg = map_segment(env_.fd());
  ASSERT_NE(seg, nullptr);
  orch_device_config c{sizeof(orch_device_config), 0, env_.fd(), 0};
  orch_device* d = nullptr;
  const auto saved_gran = seg->granularity;
  const auto saved_capacity = seg->capacity;
  const auto saved_mode = seg->free_mode;
  for (uint64_t bad : {uint64_t{0}, uint64_t{3}, 3 * MiB}) {
    seg->granularity = bad;
    EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID) << "granularity " << bad;
  }
  seg->granularity = saved_gran;
  seg->capacity = 0;
  EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID);
  seg->capacity = saved_capacity;
  seg->free_mode = 7;
  EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID);
  seg->free_mode = saved_mode;
  const auto saved_runtime = seg->runtime_version;
  seg->runtime_version = 0;
  EXPECT_EQ(be_->device_open(&c, &d), ORCH_INVALID);
  seg->runtime_version = saved_runtime;
  munmap(seg, sizeof *seg);
}

TEST_F(sim_backend, sim_calls_stay_safe_when_the_segment_is_corrupted_after_open) {
  auto* seg = map_segment(env_.fd());
  ASSERT_NE(seg, nullptr);
  const auto saved_gran = seg->granularity;
  const auto saved_capacity = seg->capacity;
  seg->granularity = 0;   // would divide by zero if re-read
  seg->capacity = ~0ull;  // would lift the limit if re-read
  uint64_t va = 0;
  uint64_t h = 0;
  EXPECT_EQ(be_->va_reserve(dev_, 1, &va), ORCH_OK);
  EXPECT_EQ(be_->phys_create(dev_, 512 * MiB, &h), ORCH_OOM_RETRYABLE);
  ASSERT_EQ(be_->phys_create(dev_, gran_, &h), ORCH_OK);
  EXPECT_EQ(be_->phys_release(dev_, h), ORCH_OK);
  uint64_t bytes = 0;
  EXPECT_EQ(be_->granularity(dev_, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, gran_);
  EXPECT_EQ(be_->device_total_mem(dev_, &bytes), ORCH_OK);
  EXPECT_EQ(bytes, 256 * MiB);
  seg->granularity = saved_gran;
  seg->capacity = saved_capacity;
  munmap(seg, sizeof *seg);
}

TEST_F(sim_backend, sim_other_usage_near_the_maximum_refuses_every_allocation) {
  const orch_sim_api* sim = env_.sim();
  uint64_t h = 0;
  uint64_t free_bytes = 1;
  for (uint64_t other : {~0ull, ~0ull - 64 * MiB, ~0ull - 512 * MiB}) {
    ASSERT_EQ(sim->set_other_usage(dev_, other), ORCH_OK);
    EXPECT_EQ(be_->phys_create(dev_, gran_, &h), ORCH_OOM_RETRYABLE) << other;
    EXPECT_EQ(be_->mem_get_info(dev_, &free_bytes, nullptr), ORCH_OK);
    EXPECT_EQ(free_bytes, 0u);
  }
  ASSERT_EQ(sim->set_other_usage(dev_, 0), ORCH_OK);
  // Sizes whose rounding would wrap are refused, not wrapped.
  uint64_t va = 0;
  EXPECT_EQ(be_->va_reserve(dev_, ~0ull, &va), ORCH_INVALID);
  EXPECT_EQ(be_->phys_create(dev_, ~0ull / gran_ * gran_, &h),
            ORCH_OOM_RETRYABLE);
}

// The segment is a memfd (docs/sim-device.md): nothing named may appear in /dev/shm. A listing
// that fails must fail the test, or a missing /dev/shm would pass it unseen. The machine
// ledger's comfy-orch-budget-<uid> lives there by design (docs/shared-memory.md) and is not the
// sim's.
TEST_F(sim_backend, sim_leaves_nothing_in_dev_shm) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it("/dev/shm", ec);
  ASSERT_FALSE(ec) << "cannot list /dev/shm: " << ec.message();
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("comfy-orch-budget-", 0) == 0) continue;
    EXPECT_EQ(name.find("orch"), std::string::npos) << it->path();
  }
  ASSERT_FALSE(ec) << "listing /dev/shm failed part way: " << ec.message();
}

}  // namespace
}  // namespace orch::test
