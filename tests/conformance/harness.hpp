// Shared fixture plumbing for the conformance suites: loads plugins through the real loader
// (dlopen), creates a sim device where the target is sim, and says why a target must skip.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
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
// load the driver stand-ins the build made (two 8 GiB devices, as a card is larger than the
// scenarios' budgets; a scenario that needs a device of its own size asks for one:
// device_env::size_to_capacity), at CUDA 12.0 and ROCm 6.2; a variable already set (a test's own
// choice) is kept. Before any backend loads its driver.
inline void use_driver_standins_if_asked() {
  const char* asked = std::getenv("ORCH_TEST_STANDINS");
  if (asked == nullptr || std::string(asked) != "1") return;
#ifdef ORCH_TEST_STANDIN_CUDA
  ::setenv("ORCH_CUDA_DRIVER", ORCH_TEST_STANDIN_CUDA, 0);
  ::setenv("ORCH_STANDIN_CUDA_VERSION", "12000", 0);
  ::setenv("ORCH_STANDIN_CUDA_DEVICES", "2", 0);
#endif
#ifdef ORCH_TEST_STANDIN_HIP
  ::setenv("ORCH_HIP_RUNTIME", ORCH_TEST_STANDIN_HIP, 0);
  ::setenv("ORCH_STANDIN_HIP_VERSION", "60200000", 0);
  ::setenv("ORCH_STANDIN_HIP_DEVICES", "2", 0);
#endif
}

// The driver stand-in a cuda or hip target runs on, when it runs on one: its controls stand for
// the sim device's where a scenario needs them (a fault injected, a failing poll, other processes'
// usage, the device's size, the syncs and releases counted), on device `ordinal`.
class driver_standin {
 public:
  // Empty when `backend`'s driver is not the stand-in (a real card, or ORCH_TEST_STANDINS unset).
  static driver_standin of(orch_backend_kind backend, int32_t ordinal) {
    driver_standin d;
    d.ordinal_ = ordinal;
    const char* file = nullptr;
    const char* used = nullptr;
#ifdef ORCH_TEST_STANDIN_CUDA
    if (backend == ORCH_BACKEND_CUDA) {
      file = ORCH_TEST_STANDIN_CUDA;
      used = std::getenv("ORCH_CUDA_DRIVER");
      d.prefix_ = "orch_standin_cuda_";
      d.create_ = "cuMemCreate";
      d.map_ = "cuMemMap";
      d.poll_ = "cuMemGetInfo";
    }
#endif
#ifdef ORCH_TEST_STANDIN_HIP
    if (backend == ORCH_BACKEND_HIP) {
      file = ORCH_TEST_STANDIN_HIP;
      used = std::getenv("ORCH_HIP_RUNTIME");
      d.prefix_ = "orch_standin_hip_";
      d.create_ = "hipMemCreate";
      d.map_ = "hipMemMap";
      d.poll_ = "hipMemGetInfo";
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
    poll_ = o.poll_;
    ordinal_ = o.ordinal_;
    std::swap(changed_, o.changed_);
    return *this;
  }
  // Undoes what this scenario set, as a sim segment of its own would: the driver outlives the
  // scenario when the suite runs in one process (by hand; ctest runs each test alone).
  ~driver_standin() {
    if (lib_ == nullptr) return;
    if (changed_) {
      const auto fail = fn<orch_standin_fail_fn>("fail");
      for (const char* entry : {create_, map_, poll_}) fail(entry, 0, 0);
      fn<orch_standin_set_other_usage_fn>("set_other_usage")(ordinal_, 0);
      fn<orch_standin_set_memory_fn>("set_memory")(ordinal_, 0);
    }
    ::dlclose(lib_);
  }
  explicit operator bool() const { return lib_ != nullptr; }

  // The sim fault kinds a driver has: create OOM, create and map errors, a failed free-memory
  // poll (cuMemGetInfo / hipMemGetInfo). False for another. ORCH_SIM_FAULT_ALWAYS holds until
  // cleared with 0, as on sim.
  bool inject_fault(uint32_t fault, int32_t count) {
    constexpr int out_of_memory = 2;  // CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory
    constexpr int unknown = 999;      // CUDA_ERROR_UNKNOWN, hipErrorUnknown
    const auto fail = fn<orch_standin_fail_fn>("fail");
    const int n = count >= ORCH_SIM_FAULT_ALWAYS ? ORCH_STANDIN_ALWAYS : count;
    if (fault == ORCH_SIM_FAULT_CREATE_OOM) fail(create_, out_of_memory, n);
    else if (fault == ORCH_SIM_FAULT_DEVICE_ERROR) fail(create_, unknown, n);
    else if (fault == ORCH_SIM_FAULT_MAP) fail(map_, unknown, n);
    else if (fault == ORCH_SIM_FAULT_POLL) fail(poll_, unknown, n);
    else return false;
    changed_ = true;
    return true;
  }
  bool set_other_usage(uint64_t bytes) {
    changed_ = true;
    return fn<orch_standin_set_other_usage_fn>("set_other_usage")(ordinal_, bytes) == 0;
  }
  bool set_memory(uint64_t bytes) {
    changed_ = true;
    return fn<orch_standin_set_memory_fn>("set_memory")(ordinal_, bytes) == 0;
  }
  // The sim's counters that a driver has: syncs and releases (the driver's, every device's),
  // this process's memory on the device and other processes' usage there.
  orch_sim_counters counters() const {
    orch_standin_stats s{};
    fn<orch_standin_stats_fn>("stats")(&s);
    orch_standin_memory m{};
    EXPECT_EQ(fn<orch_standin_memory_fn>("memory")(ordinal_, &m), 0);
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    c.syncs = s.syncs;
    c.releases = s.releases;
    c.process_used_bytes = m.created_bytes;
    c.used_bytes = m.created_bytes;
    c.other_bytes = m.other_bytes;
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
  const char* poll_ = nullptr;
  int32_t ordinal_ = 0;
  bool changed_ = false;  // a control was set: undo it when done
};

// A clock the harness controls, lent to the pager as the host's (orch_host_services.now_ns): a
// pager over a driver reads the host's clock (a cuda or hip backend has none of its own), so
// freezing and moving it drives the pager's poll interval as the sim's device clock does on sim.
// Until frozen it is CLOCK_MONOTONIC, as the sim's is.
class test_clock {
 public:
  test_clock() = default;
  test_clock(const test_clock&) = delete;
  test_clock& operator=(const test_clock&) = delete;
  void set(uint64_t now_ns) {
    now_ns_.store(now_ns);
    frozen_.store(true, std::memory_order_release);
  }
  bool advance(uint64_t delta_ns) {
    if (!frozen_.load(std::memory_order_acquire)) return false;
    now_ns_.fetch_add(delta_ns);
    return true;
  }
  // The services that lend it; valid while this clock lives.
  const orch_host_services* services() const { return &services_; }

 private:
  static uint64_t now(void* ctx) {
    const auto* c = static_cast<const test_clock*>(ctx);
    if (c->frozen_.load(std::memory_order_acquire)) return c->now_ns_.load();
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  std::atomic<bool> frozen_{false};
  std::atomic<uint64_t> now_ns_{0};
  const orch_host_services services_{.struct_size = sizeof(orch_host_services),
                                     .reserved0 = 0,
                                     .ctx = this,
                                     .log = nullptr,
                                     .now_ns = now,
                                     .report_release = nullptr};
};

// `host`: the services lent at init (the harness's clock: test_clock), else none.
inline std::unique_ptr<plugins::plugin_library> load(const char* path,
                                                     const orch_host_services* host = nullptr) {
  use_driver_standins_if_asked();
  auto lib = plugins::plugin_library::open(relocated(path));
  if (!lib) {
    ADD_FAILURE() << lib.err().code << ": " << lib.err().message;
    return nullptr;
  }
  auto st = (*lib)->init(host);
  if (!st) ADD_FAILURE() << st.err().message;
  return std::move(*lib);
}

// A device to run a suite on: a fresh sim segment, or device `ordinal` of a real GPU.
class device_env {
 public:
  // A second device beside a first: on sim a segment of its own, on a driver its device 1. The
  // reason to skip where the driver has one device.
  std::string open_another(const target& t, uint64_t capacity) {
    ordinal_ = t.backend == ORCH_BACKEND_SIM ? 0 : 1;
    return open(t, capacity);
  }

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
    if (count <= ordinal_) return std::string("needs a second ") + t.name + " device";
    capacity_ = capacity;
    capacity_cap_ = capacity;  // real devices are capped to the scenario's capacity
    standin_ = driver_standin::of(t.backend, ordinal_);
    if (standin_) {
      // A device of its own for the controls (a scenario's own allocation, as on sim).
      control_ = open_device();
      if (control_ == nullptr) return "device open on the driver stand-in failed";
    }
    return "";
  }

  // For a scenario whose numbers need the device to be exactly `capacity` (the free memory a
  // poll reads is then the scenario's): sim's always is; a stand-in is resized to it (before the
  // pager opens); a card must be that size. Empty when it is, else the reason to skip.
  std::string size_to_capacity() {
    if (sim_ != nullptr) return "";
    if (standin_)
      return standin_.set_memory(capacity_) ? "" : "the driver stand-in could not be resized";
    orch_device* d = open_device();
    uint64_t total = 0;
    const bool exact = d != nullptr && backend_->device_total_mem(d, &total) == ORCH_OK &&
                       total == capacity_;
    if (d != nullptr) backend_->device_close(d);
    return exact ? "" : "needs a device of exactly the scenario's " +
                            std::to_string(capacity_ / MiB) + " MiB";
  }

  orch_device* open_device() {
    orch_device_config dc{sizeof(orch_device_config), ordinal_, fd_, 0};
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
  orch_status inject_fault(uint32_t fault, int32_t count) {
    if (sim_ != nullptr) return sim_->inject_fault(control_, fault, count);
    return standin_ && standin_.inject_fault(fault, count) ? ORCH_OK : ORCH_UNSUPPORTED;
  }
  orch_status set_other_usage(uint64_t bytes) {
    if (sim_ != nullptr) return sim_->set_other_usage(control_, bytes);
    return standin_ && standin_.set_other_usage(bytes) ? ORCH_OK : ORCH_UNSUPPORTED;
  }
  // The clock the pager reads: the sim device's own, else the harness's (lent_services).
  orch_status set_clock(uint64_t now_ns) {
    if (sim_ != nullptr) return sim_->set_clock(control_, now_ns);
    clock_.set(now_ns);
    return ORCH_OK;
  }
  orch_status advance_clock(uint64_t delta_ns) {
    if (sim_ != nullptr) return sim_->advance_clock(control_, delta_ns);
    return clock_.advance(delta_ns) ? ORCH_OK : ORCH_INVALID;
  }
  // What to lend a pager at init: the harness's clock (a sim backend's own clock comes first).
  const orch_host_services* lent_services() const { return clock_.services(); }
  int32_t ordinal() const { return ordinal_; }
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
  int32_t ordinal_ = 0;
  uint64_t capacity_ = 0;
  uint64_t capacity_cap_ = 0;
  driver_standin standin_;
  test_clock clock_;
};

inline orch_pager_config pager_config(const device_env& env, uint32_t level = ORCH_LEVEL_4) {
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = level;
  c.ordinal = env.ordinal();
  c.sim_fd = env.fd();
  c.page_size = page;
  c.budget_cap = env.capacity_cap();
  c.poll_interval_ms = -1;
  c.poll_floor = -1;
  return c;
}

}  // namespace orch::test
