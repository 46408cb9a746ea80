// The cuda backend, pager and allocator against the driver stand-in (docs/gpu.md, "The driver
// stand-ins") at the driver versions a card may have, with the faults a card may produce. A
// driver is loaded once per process, so each case runs in a child of its own with its driver's
// environment; the child prints what went wrong and what the plugins logged, and the parent
// asserts on its exit status and that text.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../conformance/targets.hpp"
#include "standins/standin_control.h"

namespace orch::test {
namespace {

struct child_result {
  int code = -1;
  std::string output;
};

using env_list = std::vector<std::pair<const char*, std::string>>;

// Runs body in a forked child with `env` set, its stdout and stderr captured.
child_result in_child(const env_list& env, const std::function<int()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    for (const auto& [k, v] : env) ::setenv(k, v.c_str(), 1);
    const int code = body();
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::close(fds[1]);
  child_result r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

#define CHILD_CHECK(cond)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::printf("check failed at line %d: %s\n", __LINE__, #cond);        \
      return 1;                                                             \
    }                                                                       \
  } while (0)

void log_to_stdout(void* /*ctx*/, int32_t level, const char* plugin, const char* message) {
  std::printf("log %d %s: %s\n", level, plugin != nullptr ? plugin : "?", message);
}
const orch_host_services services{.struct_size = sizeof(orch_host_services),
                                  .reserved0 = 0,
                                  .ctx = nullptr,
                                  .log = log_to_stdout,
                                  .now_ns = nullptr,
                                  .report_release = nullptr};

std::unique_ptr<plugins::plugin_library> load_logged(const char* path) {
  auto lib = plugins::plugin_library::open(path);
  if (!lib) return nullptr;
  if (!(*lib)->init(&services)) return nullptr;
  return std::move(*lib);
}

// A stand-in's controls, from the same file the backend loaded (dlopen hands back its handle).
struct standin {
  explicit standin(const char* file = ORCH_TEST_STANDIN_CUDA, std::string prefix = "orch_standin_cuda_")
      : lib(::dlopen(file, RTLD_NOW | RTLD_LOCAL)), prefix_(std::move(prefix)) {}
  void* lib;
  template <typename F>
  F fn(const char* name) const {
    return reinterpret_cast<F>(::dlsym(lib, (prefix_ + name).c_str()));
  }
  void fail(const char* entry, int status, int count = 1) const {
    fn<orch_standin_fail_fn>("fail")(entry, status, count);
  }
  void lose_device() const { fn<orch_standin_lose_device_fn>("lose_device")(); }
  orch_standin_stats stats() const {
    orch_standin_stats s{};
    fn<orch_standin_stats_fn>("stats")(&s);
    return s;
  }
  int requested(const char* entry) const {
    return fn<orch_standin_requested_version_fn>("requested_version")(entry);
  }
  int set_other_usage(int device, uint64_t bytes) const {
    return fn<orch_standin_set_other_usage_fn>("set_other_usage")(device, bytes);
  }
  int set_memory(int device, uint64_t bytes) const {
    return fn<orch_standin_set_memory_fn>("set_memory")(device, bytes);
  }
  orch_standin_memory memory(int device) const {
    orch_standin_memory m{};
    if (fn<orch_standin_memory_fn>("memory")(device, &m) != 0) m.total_bytes = UINT64_MAX;
    return m;
  }

 private:
  std::string prefix_;
};

env_list driver_env(int version) {
  return {{"ORCH_CUDA_DRIVER", ORCH_TEST_STANDIN_CUDA},
          {"ORCH_STANDIN_CUDA_VERSION", std::to_string(version)}};
}

constexpr int cuda_launch_failed = 719;   // CUDA_ERROR_LAUNCH_FAILED
constexpr int cuda_out_of_memory = 2;     // CUDA_ERROR_OUT_OF_MEMORY

orch_pager_config cuda_pager_config();

// ---- driver versions ----------------------------------------------------------------------------

class cuda_driver_version : public ::testing::TestWithParam<int> {};

// Every driver from 12.0 on: found, its version reported, and the backend's whole round trip
// (the synchronisation included: on 13.0 the argumentless cuCtxSynchronize is a different symbol
// from the one asked at the headers' version).
TEST_P(cuda_driver_version, the_backend_finds_the_device_and_runs_its_round_trip) {
  const int version = GetParam();
  const child_result r = in_child(driver_env(version), [version] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    const orch_backend_api* be = lib->table().backend_api;
    int32_t count = 0;
    CHILD_CHECK(be->device_count(&count) == ORCH_OK);
    CHILD_CHECK(count == 1);
    orch_device_config c{sizeof(orch_device_config), 0, -1, 0};
    orch_device* dev = nullptr;
    CHILD_CHECK(be->device_open(&c, &dev) == ORCH_OK);
    uint32_t major = 0;
    uint32_t minor = 0;
    CHILD_CHECK(be->runtime_version(dev, &major, &minor) == ORCH_OK);
    CHILD_CHECK(major == uint32_t(version / 1000) && minor == uint32_t(version % 1000 / 10));
    uint64_t gran = 0;
    CHILD_CHECK(be->granularity(dev, &gran) == ORCH_OK && gran == 2 * MiB);
    uint64_t va = 0;
    uint64_t handle = 0;
    CHILD_CHECK(be->va_reserve(dev, 4 * gran, &va) == ORCH_OK);
    CHILD_CHECK(be->phys_create(dev, gran, &handle) == ORCH_OK);
    CHILD_CHECK(be->map(dev, va, gran, handle) == ORCH_OK);
    CHILD_CHECK(be->synchronize(dev) == ORCH_OK);
    uint64_t free_bytes = 0;
    uint64_t total = 0;
    CHILD_CHECK(be->mem_get_info(dev, &free_bytes, &total) == ORCH_OK);
    CHILD_CHECK(total - free_bytes == gran);
    CHILD_CHECK(be->unmap(dev, va, gran) == ORCH_OK);
    CHILD_CHECK(be->phys_release(dev, handle) == ORCH_OK);
    CHILD_CHECK(be->va_free(dev, va, 4 * gran) == ORCH_OK);
    std::vector<unsigned char> host(MiB);
    CHILD_CHECK(be->host_register(dev, host.data(), host.size()) == ORCH_OK);
    CHILD_CHECK(be->host_unregister(dev, host.data()) == ORCH_OK);
    const orch_standin_stats s = standin{}.stats();
    CHILD_CHECK(s.created_bytes == 0 && s.mapped_bytes == 0 && s.reservations == 0);
    CHILD_CHECK(s.syncs == 1 && s.failed_syncs == 0);
    be->device_close(dev);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  // The driver found is said once, with its version.
  const std::string said = "CUDA " + std::to_string(version / 1000) + "." +
                           std::to_string(version % 1000 / 10);
  EXPECT_NE(r.output.find(said), std::string::npos) << r.output;
}

// Each entry point is asked at the version of the prototype the backend declares, never above
// 12.0 (the oldest driver it runs on), so the pointer it gets is the one it calls.
TEST_P(cuda_driver_version, each_entry_point_is_asked_at_its_prototypes_version) {
  const child_result r = in_child(driver_env(GetParam()), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    int32_t count = 0;
    (void)lib->table().backend_api->device_count(&count);
    const standin d;
    const std::vector<std::pair<const char*, int>> expected = {
        {"cuInit", 2000},
        {"cuDriverGetVersion", 2020},
        {"cuDeviceGetCount", 2000},
        {"cuDeviceGet", 2000},
        {"cuDeviceTotalMem", 3020},
        {"cuDevicePrimaryCtxRetain", 7000},
        {"cuDevicePrimaryCtxRelease", 11000},
        {"cuCtxPushCurrent", 4000},
        {"cuCtxPopCurrent", 4000},
        {"cuCtxSynchronize", 2000},
        {"cuMemGetInfo", 3020},
        {"cuMemAddressReserve", 10020},
        {"cuMemAddressFree", 10020},
        {"cuMemCreate", 10020},
        {"cuMemRelease", 10020},
        {"cuMemMap", 10020},
        {"cuMemUnmap", 10020},
        {"cuMemSetAccess", 10020},
        {"cuMemGetAllocationGranularity", 10020},
        {"cuMemHostRegister", 6050},
        {"cuMemHostUnregister", 4000}};
    int wrong = 0;
    for (const auto& [name, version] : expected)
      if (d.requested(name) != version) {
        std::printf("%s asked at %d, its prototype is %d's\n", name, d.requested(name), version);
        ++wrong;
      }
    return wrong == 0 ? 0 : 1;
  });
  EXPECT_EQ(r.code, 0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(drivers, cuda_driver_version, ::testing::Values(12000, 12040, 12080, 13000),
                         [](const auto& p) { return "cuda_" + std::to_string(p.param); });

// A driver older than 12.0 is refused with what was found and what is needed.
TEST(cuda_driver, a_driver_older_than_12_0_is_refused_naming_both_versions) {
  const child_result r = in_child(driver_env(11080), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    int32_t count = 0;
    CHILD_CHECK(lib->table().backend_api->device_count(&count) == ORCH_DEVICE_ERROR);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("CUDA 11.8 driver found; the cuda backend needs CUDA 12.0"),
            std::string::npos)
      << r.output;
}

// A driver without an entry point the backend needs (virtual memory management, on a platform
// that lacks it) is named with the CUDA version that introduced it.
TEST(cuda_driver, a_driver_lacking_an_entry_point_is_refused_naming_it) {
  env_list env = driver_env(12040);
  env.emplace_back("ORCH_STANDIN_CUDA_HIDE", "cuMemCreate");
  const child_result r = in_child(env, [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    int32_t count = 0;
    CHILD_CHECK(lib->table().backend_api->device_count(&count) == ORCH_DEVICE_ERROR);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("CUDA 12.4 driver lacks cuMemCreate (CUDA 10.2)"), std::string::npos)
      << r.output;
}

// The pager, which a worker opens first, says the same when its device cannot be opened.
TEST(cuda_driver, the_pager_names_the_driver_it_refused) {
  const child_result r = in_child(driver_env(11080), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_PAGER_CUDA);
    CHILD_CHECK(lib != nullptr);
    orch_pager_config c = cuda_pager_config();
    orch_pager* pager = nullptr;
    CHILD_CHECK(lib->table().pager_api->device_open(&c, &pager) == ORCH_DEVICE_ERROR);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("device 0: CUDA 11.8 driver found"), std::string::npos) << r.output;
}

// ---- faults -------------------------------------------------------------------------------------

orch_pager_config cuda_pager_config() {
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.ordinal = 0;
  c.sim_fd = -1;
  c.page_size = page;
  c.budget_cap = 1 * GiB;
  c.poll_interval_ms = -1;
  c.poll_floor = -1;
  return c;
}

// Fills 1 GiB with a 32-page region's steady state: 23 resident, unpinned pages.
int fill_region(const orch_pager_api* api, orch_pager* pager, orch_region** out) {
  CHILD_CHECK(api->region_create(pager, 32 * page, out, nullptr) == ORCH_OK);
  for (uint64_t p = 0; p < 23; ++p) {
    CHILD_CHECK(api->region_fault(*out, p * page, page, nullptr, 0, nullptr, nullptr) == ORCH_OK);
    CHILD_CHECK(api->region_unpin(*out, p * page, page) == ORCH_OK);
  }
  return 0;
}

// The device may still read a page until a synchronisation succeeds: one that fails stops the
// eviction before any page is unmapped, and the caller and the log hear of it.
TEST(cuda_faults, a_failed_synchronisation_before_eviction_frees_nothing_and_reaches_the_host) {
  const child_result r = in_child(driver_env(12000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_PAGER_CUDA);
    CHILD_CHECK(lib != nullptr);
    const orch_pager_api* api = lib->table().pager_api;
    orch_pager_config c = cuda_pager_config();
    orch_pager* pager = nullptr;
    CHILD_CHECK(api->device_open(&c, &pager) == ORCH_OK);
    orch_region* region = nullptr;
    if (fill_region(api, pager, &region) != 0) return 1;
    const standin d;
    const uint64_t mapped = d.stats().mapped_bytes;
    d.fail("cuCtxSynchronize", cuda_launch_failed);
    uint64_t freed = 0;
    const orch_status st = api->reclaim(pager, 4 * page, 0, &freed);
    std::printf("reclaim answered %d, freed %llu\n", st, static_cast<unsigned long long>(freed));
    CHILD_CHECK(st == ORCH_DEVICE_ERROR);
    CHILD_CHECK(freed == 0);
    CHILD_CHECK(d.stats().unsafe_frees == 0);
    CHILD_CHECK(d.stats().mapped_bytes == mapped);
    // A fault that must evict meets the same refusal rather than unmapping behind it.
    CHILD_CHECK(api->region_fault(region, 23 * page, page, nullptr, 0, nullptr, nullptr) ==
                ORCH_DEVICE_ERROR);
    CHILD_CHECK(d.stats().unsafe_frees == 0);
    lib->shutdown();
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("synchronize failed"), std::string::npos) << r.output;
}

struct allocator_session {
  std::unique_ptr<plugins::plugin_library> pager_lib;
  std::unique_ptr<plugins::plugin_library> lib;
  const orch_pager_api* pager_api = nullptr;
  orch_pager* pager = nullptr;
  const orch_allocator_api* api = nullptr;
  orch_allocator* alloc = nullptr;

  int open() {
    pager_lib = load_logged(ORCH_TEST_PLUGIN_PAGER_CUDA);
    CHILD_CHECK(pager_lib != nullptr);
    pager_api = pager_lib->table().pager_api;
    orch_pager_config pc = cuda_pager_config();
    CHILD_CHECK(pager_api->device_open(&pc, &pager) == ORCH_OK);
    lib = load_logged(ORCH_TEST_PLUGIN_ALLOCATOR_CUDA);
    CHILD_CHECK(lib != nullptr);
    api = lib->table().allocator_api;
    orch_allocator_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.streams = ORCH_ALLOC_STREAMS_DEFAULT;
    c.pager_api = pager_api;
    c.pager = pager;
    CHILD_CHECK(api->open(&c, &alloc) == ORCH_OK);
    return 0;
  }
  void close() {
    lib->shutdown();
    pager_lib->shutdown();
  }
};

// A cast buffer is not unmapped while the stream may still read it: the reset answers the
// failure, the buffer stays, and a later reset (the device well again) frees it.
TEST(cuda_faults, a_failed_synchronisation_before_a_cast_buffer_is_freed_reaches_the_host) {
  const child_result r = in_child(driver_env(12000), [] {
    allocator_session a;
    if (a.open() != 0) return 1;
    uint64_t address = 0;
    CHILD_CHECK(a.api->cast_buffer(a.alloc, 0, 20 * MiB, &address) == ORCH_OK);
    const standin d;
    CHILD_CHECK(d.stats().mapped_bytes == 32 * MiB);
    d.fail("cuCtxSynchronize", cuda_launch_failed);
    const orch_status st = a.api->reset_cast_buffers(a.alloc);
    std::printf("reset answered %d\n", st);
    CHILD_CHECK(st == ORCH_DEVICE_ERROR);
    CHILD_CHECK(d.stats().unsafe_frees == 0);
    CHILD_CHECK(d.stats().mapped_bytes == 32 * MiB);
    CHILD_CHECK(a.api->reset_cast_buffers(a.alloc) == ORCH_OK);
    CHILD_CHECK(d.stats().mapped_bytes == 0);
    a.close();
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("synchronize failed"), std::string::npos) << r.output;
}

// The allocator's memory comes from the backend it names: every chunk is a cuMemCreate.
TEST(cuda_faults, the_allocator_allocates_through_the_cuda_driver) {
  const child_result r = in_child(driver_env(12000), [] {
    allocator_session a;
    if (a.open() != 0) return 1;
    uint64_t address = 0;
    CHILD_CHECK(a.api->cast_buffer(a.alloc, 0, 20 * MiB, &address) == ORCH_OK);
    const standin d;
    CHILD_CHECK(d.stats().creates == 2);
    CHILD_CHECK(d.stats().created_bytes == 32 * MiB);
    CHILD_CHECK(a.api->reset_cast_buffers(a.alloc) == ORCH_OK);
    CHILD_CHECK(d.stats().created_bytes == 0);
    a.close();
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
}

// The driver's out-of-memory is the retryable one; the pager reclaims once and retries once.
TEST(cuda_faults, a_driver_out_of_memory_is_retryable) {
  const child_result r = in_child(driver_env(12000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    const orch_backend_api* be = lib->table().backend_api;
    orch_device_config c{sizeof(orch_device_config), 0, -1, 0};
    orch_device* dev = nullptr;
    CHILD_CHECK(be->device_open(&c, &dev) == ORCH_OK);
    standin{}.fail("cuMemCreate", cuda_out_of_memory);
    uint64_t handle = 0;
    CHILD_CHECK(be->phys_create(dev, 2 * MiB, &handle) == ORCH_OOM_RETRYABLE);
    CHILD_CHECK(be->phys_create(dev, 2 * MiB, &handle) == ORCH_OK);
    CHILD_CHECK(be->phys_release(dev, handle) == ORCH_OK);
    be->device_close(dev);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
}

// The controls the conformance suites drive in place of the sim device's (harness.hpp): each
// device's memory is its own; other processes' usage lowers what cuMemGetInfo reports free and
// what cuMemCreate can take; a device is resized, never below what this process holds there; a
// failed poll holds until cleared.
TEST(cuda_controls, each_device_answers_for_its_own_memory_other_usage_and_a_failing_poll) {
  env_list env = driver_env(12000);
  env.emplace_back("ORCH_STANDIN_CUDA_DEVICES", "2");
  env.emplace_back("ORCH_STANDIN_CUDA_MEMORY", std::to_string(64 * MiB));
  const child_result r = in_child(env, [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_CUDA);
    CHILD_CHECK(lib != nullptr);
    const orch_backend_api* be = lib->table().backend_api;
    orch_device* dev[2] = {nullptr, nullptr};
    for (int32_t i = 0; i < 2; ++i) {
      orch_device_config c{sizeof(orch_device_config), i, -1, 0};
      CHILD_CHECK(be->device_open(&c, &dev[i]) == ORCH_OK);
    }
    const standin d;
    CHILD_CHECK(d.set_other_usage(0, 16 * MiB) == 0);
    CHILD_CHECK(d.set_other_usage(2, 16 * MiB) == -1);  // no device 2
    uint64_t free_bytes = 0;
    uint64_t total = 0;
    CHILD_CHECK(be->mem_get_info(dev[0], &free_bytes, &total) == ORCH_OK);
    CHILD_CHECK(free_bytes == 48 * MiB && total == 64 * MiB);
    CHILD_CHECK(be->mem_get_info(dev[1], &free_bytes, &total) == ORCH_OK);
    CHILD_CHECK(free_bytes == 64 * MiB);
    uint64_t h0 = 0;
    uint64_t h1 = 0;
    CHILD_CHECK(be->phys_create(dev[0], 50 * MiB, &h0) == ORCH_OOM_RETRYABLE);
    CHILD_CHECK(be->phys_create(dev[0], 48 * MiB, &h0) == ORCH_OK);
    CHILD_CHECK(be->phys_create(dev[1], 2 * MiB, &h1) == ORCH_OK);
    CHILD_CHECK(d.memory(0).created_bytes == 48 * MiB && d.memory(0).other_bytes == 16 * MiB);
    CHILD_CHECK(d.memory(1).created_bytes == 2 * MiB && d.memory(1).other_bytes == 0);
    CHILD_CHECK(d.set_memory(0, 32 * MiB) == -1);  // it holds 48 MiB there
    CHILD_CHECK(d.set_memory(1, 32 * MiB) == 0);
    CHILD_CHECK(be->device_total_mem(dev[1], &total) == ORCH_OK && total == 32 * MiB);
    CHILD_CHECK(d.set_memory(1, 0) == 0);  // back to the environment's size
    CHILD_CHECK(be->device_total_mem(dev[1], &total) == ORCH_OK && total == 64 * MiB);
    d.fail("cuMemGetInfo", 999, ORCH_STANDIN_ALWAYS);
    CHILD_CHECK(be->mem_get_info(dev[1], &free_bytes, &total) == ORCH_DEVICE_ERROR);
    CHILD_CHECK(be->mem_get_info(dev[1], &free_bytes, &total) == ORCH_DEVICE_ERROR);
    d.fail("cuMemGetInfo", 0, 0);
    CHILD_CHECK(be->mem_get_info(dev[1], &free_bytes, &total) == ORCH_OK);
    CHILD_CHECK(be->phys_release(dev[0], h0) == ORCH_OK);
    CHILD_CHECK(be->phys_release(dev[1], h1) == ORCH_OK);
    CHILD_CHECK(d.memory(0).created_bytes == 0 && d.memory(1).created_bytes == 0);
    for (orch_device* x : dev) be->device_close(x);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
}

// A device that falls off the bus: every call answers DEVICE_ERROR, nothing crashes, and
// closing still works.
TEST(cuda_faults, a_lost_device_answers_device_error_and_closes_cleanly) {
  const child_result r = in_child(driver_env(12000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_PAGER_CUDA);
    CHILD_CHECK(lib != nullptr);
    const orch_pager_api* api = lib->table().pager_api;
    orch_pager_config c = cuda_pager_config();
    orch_pager* pager = nullptr;
    CHILD_CHECK(api->device_open(&c, &pager) == ORCH_OK);
    orch_region* region = nullptr;
    if (fill_region(api, pager, &region) != 0) return 1;
    standin{}.lose_device();
    uint64_t freed = 0;
    CHILD_CHECK(api->reclaim(pager, 4 * page, 0, &freed) == ORCH_DEVICE_ERROR);
    CHILD_CHECK(freed == 0);
    // From then on the pager maps nothing more on that device (a hit maps nothing, and answers).
    CHILD_CHECK(api->region_fault(region, 23 * page, page, nullptr, 0, nullptr, nullptr) ==
                ORCH_DEVICE_ERROR);
    CHILD_CHECK(standin{}.stats().unsafe_frees == 0);
    lib->shutdown();
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
}


// ---- hip ----------------------------------------------------------------------------------------

#ifdef ORCH_TEST_STANDIN_HIP
constexpr int hip_launch_failure = 719;  // hipErrorLaunchFailure

standin hip_standin() { return standin(ORCH_TEST_STANDIN_HIP, "orch_standin_hip_"); }

env_list runtime_env(int version) {
  return {{"ORCH_HIP_RUNTIME", ORCH_TEST_STANDIN_HIP},
          {"ORCH_STANDIN_HIP_VERSION", std::to_string(version)}};
}

TEST(hip_runtime, a_rocm_6_runtime_is_taken_and_runs_the_round_trip) {
  const child_result r = in_child(runtime_env(60200000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_HIP);
    CHILD_CHECK(lib != nullptr);
    const orch_backend_api* be = lib->table().backend_api;
    int32_t count = 0;
    CHILD_CHECK(be->device_count(&count) == ORCH_OK && count == 1);
    orch_device_config c{sizeof(orch_device_config), 0, -1, 0};
    orch_device* dev = nullptr;
    CHILD_CHECK(be->device_open(&c, &dev) == ORCH_OK);
    uint32_t major = 0;
    uint32_t minor = 0;
    CHILD_CHECK(be->runtime_version(dev, &major, &minor) == ORCH_OK && major == 6 && minor == 2);
    uint64_t va = 0;
    uint64_t handle = 0;
    CHILD_CHECK(be->va_reserve(dev, 2 * MiB, &va) == ORCH_OK);
    CHILD_CHECK(be->phys_create(dev, 2 * MiB, &handle) == ORCH_OK);
    CHILD_CHECK(be->map(dev, va, 2 * MiB, handle) == ORCH_OK);
    CHILD_CHECK(be->synchronize(dev) == ORCH_OK);
    CHILD_CHECK(be->unmap(dev, va, 2 * MiB) == ORCH_OK);
    CHILD_CHECK(be->phys_release(dev, handle) == ORCH_OK);
    CHILD_CHECK(be->va_free(dev, va, 2 * MiB) == ORCH_OK);
    const orch_standin_stats s = hip_standin().stats();
    CHILD_CHECK(s.created_bytes == 0 && s.reservations == 0 && s.syncs == 1);
    be->device_close(dev);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ROCm 6.2"), std::string::npos) << r.output;
}

// The VMM calls the backend uses work from ROCm 6.0: an older runtime is refused by name.
TEST(hip_runtime, a_rocm_5_runtime_is_refused_naming_what_it_found_and_what_it_needs) {
  const child_result r = in_child(runtime_env(50200000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_HIP);
    CHILD_CHECK(lib != nullptr);
    int32_t count = 0;
    CHILD_CHECK(lib->table().backend_api->device_count(&count) == ORCH_DEVICE_ERROR);
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ROCm 5.2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ROCm 6.0"), std::string::npos) << r.output;
}

// Where Debian's ROCm 5.2 runtime is the only one installed (as on the project's machines), the
// backend searching the system finds it and refuses it by name rather than reporting no device.
TEST(hip_runtime, the_systems_rocm_5_runtime_is_refused_by_name) {
  const child_result probe = in_child({}, [] {
    void* six = ::dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
    void* five = ::dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    return six == nullptr && five != nullptr ? 0 : 1;
  });
  if (probe.code != 0) GTEST_SKIP() << "needs ROCm 5's runtime installed and no ROCm 6 one";
  const child_result r = in_child({}, [] {
    ::unsetenv("ORCH_HIP_RUNTIME");
    auto lib = load_logged(ORCH_TEST_PLUGIN_BACKEND_HIP);
    CHILD_CHECK(lib != nullptr);
    int32_t count = 0;
    CHILD_CHECK(lib->table().backend_api->device_count(&count) == ORCH_DEVICE_ERROR);
    // The refused runtime's exit handlers run as a worker's would, the plugin unloaded first.
    lib.reset();
    std::fflush(nullptr);
    std::exit(0);
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ROCm 5."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs ROCm 6.0"), std::string::npos) << r.output;
}

TEST(hip_faults, a_failed_synchronisation_before_eviction_frees_nothing_and_reaches_the_host) {
  const child_result r = in_child(runtime_env(60200000), [] {
    auto lib = load_logged(ORCH_TEST_PLUGIN_PAGER_HIP);
    CHILD_CHECK(lib != nullptr);
    const orch_pager_api* api = lib->table().pager_api;
    orch_pager_config c = cuda_pager_config();
    orch_pager* pager = nullptr;
    CHILD_CHECK(api->device_open(&c, &pager) == ORCH_OK);
    orch_region* region = nullptr;
    if (fill_region(api, pager, &region) != 0) return 1;
    const standin d = hip_standin();
    const uint64_t mapped = d.stats().mapped_bytes;
    d.fail("hipDeviceSynchronize", hip_launch_failure);
    uint64_t freed = 0;
    CHILD_CHECK(api->reclaim(pager, 4 * page, 0, &freed) == ORCH_DEVICE_ERROR);
    CHILD_CHECK(freed == 0 && d.stats().unsafe_frees == 0 && d.stats().mapped_bytes == mapped);
    lib->shutdown();
    return 0;
  });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("synchronize failed"), std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace orch::test
