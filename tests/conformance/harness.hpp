// Shared fixture plumbing for the conformance suites: loads plugins through the real loader
// (dlopen), creates a sim device where the target is sim, and says why a target must skip.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "orch/plugin/allocator.h"
#include "orch/plugin/backend.h"
#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"
#include "../gpu/standins/standin_control.h"

// GTEST_SKIP and fatal assertions only leave the function they are in: a test body that calls a
// helper which may skip or fail must return right after it.
#define ORCH_RETURN_IF_SKIPPED()                                                 \
  do {                                                                           \
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return; \
  } while (0)

namespace orch::test {

inline constexpr uint64_t MiB = 1ull << 20;
inline constexpr uint64_t GiB = 1ull << 30;
inline constexpr uint64_t page = 32 * MiB;  // aimdo's page, used by every scenario

// One backend under test: the plugin files and the backend kind.
struct target {
  const char* name;
  orch_backend_kind backend;
  const char* backend_plugin;
  const char* pager_plugin;      // nullptr: no pager for this backend
  const char* allocator_plugin;  // nullptr: no allocator
  const char* ledger_plugin;     // nullptr: no ledger
};

// The plugin built at `path`, or the file of that name in $ORCH_TEST_PLUGIN_DIR when it is set:
// the carried GPU check runs these suites from a copy of the build on another machine
// (docs/gpu.md), where the build's absolute paths do not exist.
inline std::string relocated(const char* path) {
  const char* dir = std::getenv("ORCH_TEST_PLUGIN_DIR");
  if (dir == nullptr || *dir == '\0') return path;
  return (std::filesystem::path(dir) / std::filesystem::path(path).filename()).string();
}

// Under ctest (ORCH_TEST_STANDINS=1, tests/conformance/CMakeLists.txt) the cuda and hip backends
// load the driver stand-ins the build made (8 GiB devices, as a card is larger than the scenarios'
// budgets), at CUDA 12.0 and ROCm 6.2; a variable already set (a test's own choice) is kept. Before any backend loads its driver.
inline void use_driver_standins_if_asked() {
  const char* asked = std::getenv("ORCH_TEST_STANDINS");
  if (asked == nullptr || std::string(asked) != "1") return;
#ifdef ORCH_TEST_STANDIN_CUDA
  ::setenv("ORCH_CUDA_DRIVER", ORCH_TEST_STANDIN_CUDA, 0);
  ::setenv("ORCH_STANDIN_CUDA_VERSION", "12000", 0);
#endif
#ifdef ORCH_TEST_STANDIN_HIP
  ::setenv("ORCH_HIP_RUNTIME", ORCH_TEST_STANDIN_HIP, 0);
  ::setenv("ORCH_STANDIN_HIP_VERSION", "60200000", 0);
#endif
}

// The driver stand-in a cuda or hip target runs on, when it runs on one: its controls stand for
// the sim device's where a scenario needs them (a fault injected, the syncs and releases counted).
class driver_standin {
 public:
  // Empty when `backend`'s driver is not the stand-in (a real card, or ORCH_TEST_STANDINS unset).
  static driver_standin of(orch_backend_kind backend) {
    driver_standin d;
    const char* file = nullptr;
    const char* used = nullptr;
#ifdef ORCH_TEST_STANDIN_CUDA
    if (backend == ORCH_BACKEND_CUDA) {
      file = ORCH_TEST_STANDIN_CUDA;
      used = std::getenv("ORCH_CUDA_DRIVER");
      d.prefix_ = "orch_standin_cuda_";
      d.create_ = "cuMemCreate";
      d.map_ = "cuMemMap";
    }
#endif
#ifdef ORCH_TEST_STANDIN_HIP
    if (backend == ORCH_BACKEND_HIP) {
      file = ORCH_TEST_STANDIN_HIP;
      used = std::getenv("ORCH_HIP_RUNTIME");
      d.prefix_ = "orch_standin_hip_";
      d.create_ = "hipMemCreate";
      d.map_ = "hipMemMap";
    }
#endif
    if (file == nullptr || used == nullptr || std::string(used) != file) return {};
    d.lib_ = ::dlopen(file, RTLD_NOW | RTLD_LOCAL);  // the backend's handle, counted once more
    return d;
  }
  driver_standin() = default;
  driver_standin(driver_standin&& o) noexcept { *this = std::move(o); }
  driver_standin& operator=(driver_standin&& o) noexcept {
    std::swap(lib_, o.lib_);
    prefix_ = o.prefix_;
    create_ = o.create_;
    map_ = o.map_;
    return *this;
  }
  ~driver_standin() {
    if (lib_ != nullptr) ::dlclose(lib_);
  }
  explicit operator bool() const { return lib_ != nullptr; }

  // The sim fault kinds a driver has: create OOM, create and map errors. False for another.
  bool inject_fault(uint32_t fault, int32_t count) const {
    constexpr int out_of_memory = 2;  // CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory
    constexpr int unknown = 999;      // CUDA_ERROR_UNKNOWN, hipErrorUnknown
    const auto fail = fn<orch_standin_fail_fn>("fail");
    if (fault == ORCH_SIM_FAULT_CREATE_OOM) fail(create_, out_of_memory, count);
    else if (fault == ORCH_SIM_FAULT_DEVICE_ERROR) fail(create_, unknown, count);
    else if (fault == ORCH_SIM_FAULT_MAP) fail(map_, unknown, count);
    else return false;
    return true;
  }
  // The sim's counters that a driver has: syncs, releases, this process's device memory.
  orch_sim_counters counters() const {
    orch_standin_stats s{};
    fn<orch_standin_stats_fn>("stats")(&s);
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    c.syncs = s.syncs;
    c.releases = s.releases;
    c.process_used_bytes = s.created_bytes;
    c.used_bytes = s.created_bytes;
    return c;
  }

 private:
  template <typename F>
  F fn(const char* name) const {
    return reinterpret_cast<F>(::dlsym(lib_, (prefix_ + name).c_str()));
  }
  void* lib_ = nullptr;
  std::string prefix_;
  const char* create_ = nullptr;
  const char* map_ = nullptr;
};

inline std::unique_ptr<plugins::plugin_library> load(const char* path) {
  use_driver_standins_if_asked();
  auto lib = plugins::plugin_library::open(relocated(path));
  if (!lib) {
    ADD_FAILURE() << lib.err().code << ": " << lib.err().message;
    return nullptr;
  }
  auto st = (*lib)->init();
  if (!st) ADD_FAILURE() << st.err().message;
  return std::move(*lib);
}

// A device to run a suite on: a fresh sim segment, or device `ordinal` of a real GPU.
class device_env {
 public:
  // Returns an empty string when ready, else the reason to skip.
  std::string open(const target& t, uint64_t capacity, uint32_t free_mode = ORCH_SIM_FREE_DEVICE,
                   bool backing_store = false) {
    target_ = t;
    if (t.backend_plugin == nullptr) return std::string(t.name) + " plugins are not built here";
    backend_lib_ = load(t.backend_plugin);
    if (backend_lib_ == nullptr) return "backend plugin failed to load";
    backend_ = backend_lib_->table().backend_api;
    if (t.backend == ORCH_BACKEND_SIM) {
      sim_ = static_cast<const orch_sim_api*>(backend_lib_->table().extension);
      orch_sim_config c{sizeof(orch_sim_config), free_mode, capacity, 2 * MiB,
                        backing_store ? 1u : 0u, 0};
      if (sim_->create(&c, &fd_) != ORCH_OK) return "sim create failed";
      control_ = open_device();
      return control_ != nullptr ? "" : "sim device open failed";
    }
    int32_t count = 0;
    if (backend_->device_count(&count) != ORCH_OK || count == 0)
      return std::string("no ") + t.name + " device on this machine (driver missing or 0 devices)";
    capacity_cap_ = capacity;  // real devices are capped to the scenario's capacity
    standin_ = driver_standin::of(t.backend);
    return "";
  }

  orch_device* open_device() {
    orch_device_config dc{sizeof(orch_device_config), 0, fd_, 0};
    orch_device* d = nullptr;
    return backend_->device_open(&dc, &d) == ORCH_OK ? d : nullptr;
  }

  ~device_env() {
    if (control_ != nullptr) backend_->device_close(control_);
    if (fd_ >= 0) ::close(fd_);
  }

  bool is_sim() const { return sim_ != nullptr; }
  // The device's controls: the sim's own, or the driver stand-in's (a subset: see driver_standin).
  bool has_controls() const { return sim_ != nullptr || static_cast<bool>(standin_); }
  bool on_standin() const { return static_cast<bool>(standin_); }
  orch_status inject_fault(uint32_t fault, int32_t count) const {
    if (sim_ != nullptr) return sim_->inject_fault(control_, fault, count);
    return standin_ && standin_.inject_fault(fault, count) ? ORCH_OK : ORCH_UNSUPPORTED;
  }
  const char* name() const { return target_.name; }
  int32_t fd() const { return fd_; }
  uint64_t capacity_cap() const { return capacity_cap_; }
  const orch_backend_api* backend() const { return backend_; }
  const orch_sim_api* sim() const { return sim_; }
  orch_device* control() const { return control_; }

  orch_sim_counters counters() const {
    if (sim_ == nullptr && standin_) return standin_.counters();
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    EXPECT_EQ(sim_->counters(control_, &c), ORCH_OK);
    return c;
  }

 private:
  target target_{};
  std::unique_ptr<plugins::plugin_library> backend_lib_;
  const orch_backend_api* backend_ = nullptr;
  const orch_sim_api* sim_ = nullptr;
  orch_device* control_ = nullptr;
  int32_t fd_ = -1;
  uint64_t capacity_cap_ = 0;
  driver_standin standin_;
};

inline orch_pager_config pager_config(const device_env& env, uint32_t level = ORCH_LEVEL_4) {
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = level;
  c.ordinal = 0;
  c.sim_fd = env.fd();
  c.page_size = page;
  c.budget_cap = env.capacity_cap();
  c.poll_interval_ms = -1;
  c.poll_floor = -1;
  return c;
}

}  // namespace orch::test
