// The pager's hit path against comfy-aimdo's, on one driver, in one process (docs/performance.md,
// "The hit path against comfy-aimdo"). Run by bench/plugins/pager-vs-aimdo, which finds the
// pinned comfy-aimdo wheel's library and the driver stand-in, and counts instructions.
//
// The trace is ComfyUI's per-layer one: fault a resident 32 MiB page below the watermark, then
// unpin it, again and again. Both pagers run on the same CUDA driver, the stand-in
// (tests/gpu/standins/), loaded once: first as libcuda.so.1, as torch would have loaded the real
// one, so that aimdo (0.3.0 and later: it links no driver, it finds an already loaded
// libcuda.so.1) finds it; the cuda pager's backend opens the same file by $ORCH_CUDA_DRIVER and
// gets the same handle. The thread holds the device's primary context, as torch's does.
// aimdo is its shipped library (GPL-3.0), called through its C entry points; none of its code is
// here.
//
// Timing: `rounds` rounds, each timing one block of `block` hits of each contender in a fresh
// random order: the floor (two uncontended atomic increments, bench_plugins' own), ours, aimdo's.
// A block's time is the thread's CPU time (what another process on the core does not add to),
// with its wall time beside it. Every round is kept; the ratios are per round (same round, same
// core state), and the median and the range over the rounds are printed, --json for the record.
//
// --count KIND N: only N hits of KIND (orch, aimdo or floor) inside hits_KIND, untimed: what
// callgrind counts (valgrind --toggle-collect=hits_KIND), which load cannot move.
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "orch/plugin/pager.h"
#include "orch/plugins/loader.hpp"

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t page_bytes = 32 * MiB;  // aimdo's VBAR page; the pager's default
constexpr uint64_t region_bytes = 4 * page_bytes;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_pager_vs_aimdo: %s\n", what.c_str());
  std::exit(2);
}

// The stand-in, loaded as libcuda.so.1 (found through LD_LIBRARY_PATH, as the real one is), with
// the thread's primary context pushed before anything else calls the driver.
void load_driver_as_torch_does() {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (cu == nullptr) fail(std::string("libcuda.so.1: ") + dlerror());
  using get_proc_fn = int (*)(const char*, void**, int, unsigned long long, void*);
  const auto get_proc = reinterpret_cast<get_proc_fn>(dlsym(cu, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) fail("libcuda.so.1 has no cuGetProcAddress_v2");
  void* init = nullptr;
  void* retain = nullptr;
  void* push = nullptr;
  get_proc("cuInit", &init, 12000, 0, nullptr);
  get_proc("cuDevicePrimaryCtxRetain", &retain, 12000, 0, nullptr);
  get_proc("cuCtxPushCurrent", &push, 12000, 0, nullptr);
  if (init == nullptr || retain == nullptr || push == nullptr) fail("the driver lacks cuInit");
  void* ctx = nullptr;
  if (reinterpret_cast<int (*)(unsigned)>(init)(0) != 0 ||
      reinterpret_cast<int (*)(void**, int)>(retain)(&ctx, 0) != 0 ||
      reinterpret_cast<int (*)(void*)>(push)(ctx) != 0)
    fail("no primary context on device 0");
}

// comfy-aimdo's native library, driven as comfy_aimdo.control and model_vbar drive it.
struct aimdo_pager {
  void* lib = nullptr;
  void* devctx = nullptr;
  void* vbar = nullptr;
  int (*fault)(void*, void*, uint64_t, uint64_t, uint32_t*) = nullptr;
  bool (*unpin)(void*, void*, uint64_t, uint64_t) = nullptr;

  template <class F>
  F sym(const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr) fail(std::string("aimdo has no ") + name);
    return reinterpret_cast<F>(p);
  }

  explicit aimdo_pager(const char* path) {
    lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);  // mode 258, as comfy_aimdo.control loads it
    if (lib == nullptr) fail(std::string(path) + ": " + dlerror());
    // ComfyUI's default: its console level INFO maps to aimdo's (the library's own default, 0,
    // prints every call of the hit path to stderr).
    sym<void (*)()>("set_log_level_info")();
    if (!sym<bool (*)()>("plat_init")()) fail("aimdo plat_init failed");
    int device = 0;
    uint64_t extra_headroom = 0;
    if (!sym<bool (*)(int*, uint64_t*, size_t)>("init")(&device, &extra_headroom, 1))
      fail("aimdo init failed on the driver stand-in");
    devctx = sym<void* (*)(int)>("get_devctx")(0);
    vbar = sym<void* (*)(void*, uint64_t, int, void*)>("vbar_allocate")(devctx, region_bytes, 0,
                                                                       nullptr);
    if (devctx == nullptr || vbar == nullptr) fail("aimdo vbar_allocate failed");
    sym<void (*)(void*, void*, uint64_t)>("vbar_prioritize")(devctx, vbar, UINT64_MAX);
    fault = sym<decltype(fault)>("vbar_fault");
    unpin = sym<decltype(unpin)>("vbar_unpin");
    uint32_t sig[3];
    if (fault(devctx, vbar, 0, page_bytes, sig) != 0 || !unpin(devctx, vbar, 0, page_bytes))
      fail("aimdo's first fault of page 0 failed");
  }
  ~aimdo_pager() {
    sym<void (*)(void*, void*)>("vbar_free")(devctx, vbar);
    sym<void (*)()>("cleanup")();
    sym<void (*)()>("plat_cleanup")();
  }
};

// Ours: the cuda pager plugin through the real loader and the C ABI, on device 0 of the same
// driver, with the host's default clock (CLOCK_MONOTONIC), as in a worker.
struct orch_pager_rig {
  std::unique_ptr<orch::plugins::plugin_library> lib;
  const orch_pager_api* api = nullptr;
  orch_pager* pager = nullptr;
  orch_region* region = nullptr;

  explicit orch_pager_rig(const char* path) {
    auto opened = orch::plugins::plugin_library::open(path, false);
    if (!opened) fail(std::string(path) + ": " + opened.err().message);
    lib = std::move(*opened);
    if (!lib->init()) fail("the cuda pager's init failed");
    api = lib->table().pager_api;
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.ordinal = 0;
    c.sim_fd = -1;
    c.page_size = page_bytes;
    c.poll_interval_ms = -1;
    c.poll_floor = -1;
    if (api->device_open(&c, &pager) != ORCH_OK) fail("the cuda pager's device_open failed");
    if (api->region_create(pager, region_bytes, &region, nullptr) != ORCH_OK)
      fail("region_create failed");
    uint64_t sig[1];
    size_t len = 0;
    if (api->region_fault(region, 0, page_bytes, sig, 1, &len, nullptr) != ORCH_OK ||
        api->region_unpin(region, 0, page_bytes) != ORCH_OK)
      fail("the cuda pager's first fault of page 0 failed");
  }
  ~orch_pager_rig() {
    api->region_destroy(region);
    api->device_close(pager);
    lib->shutdown();
  }
};

// One function per contender, not inlined, so callgrind can count exactly its hits
// (--toggle-collect). Each checks every answer: a miss would not be a hit.
__attribute__((noinline)) void hits_orch(orch_pager_rig& o, uint64_t n) {
  uint64_t sig[1];
  size_t len = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (o.api->region_fault(o.region, 0, page_bytes, sig, 1, &len, nullptr) != ORCH_OK)
      fail("our fault of a resident page did not hit");
    o.api->region_unpin(o.region, 0, page_bytes);
  }
}

__attribute__((noinline)) void hits_aimdo(aimdo_pager& a, uint64_t n) {
  uint32_t sig[3];
  for (uint64_t i = 0; i < n; ++i) {
    if (a.fault(a.devctx, a.vbar, 0, page_bytes, sig) != 0)
      fail("aimdo's fault of a resident page did not hit");
    a.unpin(a.devctx, a.vbar, 0, page_bytes);
  }
}

// bench_plugins' BM_floor_two_atomic_increments, as a loop of its own.
__attribute__((noinline)) void hits_floor(std::atomic<uint64_t>& value, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    value.fetch_add(1);
    value.fetch_add(1);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}

uint64_t now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

struct block_time {
  double cpu_ns;   // per hit
  double wall_ns;  // per hit
};

template <class F>
block_time time_block(uint64_t block, F&& run) {
  const uint64_t c0 = now(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t w0 = now(CLOCK_MONOTONIC);
  run(block);
  const uint64_t w1 = now(CLOCK_MONOTONIC);
  const uint64_t c1 = now(CLOCK_THREAD_CPUTIME_ID);
  return {static_cast<double>(c1 - c0) / static_cast<double>(block),
          static_cast<double>(w1 - w0) / static_cast<double>(block)};
}

struct spread {
  double median, min, max;
};
spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

const char* usage =
    "usage: bench_pager_vs_aimdo --aimdo AIMDO_SO --pager ORCH_PAGER_CUDA_SO\n"
    "                            [--rounds R] [--block B] [--json] [--count orch|aimdo|floor N]\n"
    "Run by bench/plugins/pager-vs-aimdo, which sets the driver stand-in up.\n";

}  // namespace

int main(int argc, char** argv) {
  const char* aimdo_path = nullptr;
  const char* pager_path = nullptr;
  uint64_t rounds = 30;
  uint64_t block = 200000;
  bool json = false;
  std::string count_kind;
  uint64_t count_hits = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--aimdo" && has_value) aimdo_path = argv[++i];
    else if (a == "--pager" && has_value) pager_path = argv[++i];
    else if (a == "--rounds" && has_value) rounds = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--block" && has_value) block = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--json") json = true;
    else if (a == "--count" && i + 2 < argc) {
      count_kind = argv[++i];
      count_hits = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fputs(usage, stderr);
      return a == "--help" ? 0 : 64;
    }
  }
  if (aimdo_path == nullptr || pager_path == nullptr || rounds == 0 || block == 0) {
    std::fputs(usage, stderr);
    return 64;
  }

  load_driver_as_torch_does();
  aimdo_pager aimdo(aimdo_path);
  orch_pager_rig orch(pager_path);
  std::atomic<uint64_t> floor_value{0};

  if (!count_kind.empty()) {
    if (count_kind == "orch") hits_orch(orch, count_hits);
    else if (count_kind == "aimdo") hits_aimdo(aimdo, count_hits);
    else if (count_kind == "floor") hits_floor(floor_value, count_hits);
    else fail("--count takes orch, aimdo or floor");
    return 0;
  }

  // Warm every path (first-touch, lazy binding, the thread's pin slot) before the first round.
  hits_floor(floor_value, block / 10 + 1);
  hits_orch(orch, block / 10 + 1);
  hits_aimdo(aimdo, block / 10 + 1);

  enum contender { floor_kind, orch_kind, aimdo_kind, kinds };
  const char* names[kinds] = {"floor_two_atomic_increments", "orch_fault_unpin_hit",
                              "aimdo_fault_unpin_hit"};
  std::vector<double> cpu[kinds], wall[kinds], ours_over_aimdo, ours_over_floor,
      aimdo_over_floor;
  std::mt19937 shuffle(12345);
  for (uint64_t r = 0; r < rounds; ++r) {
    int order[kinds] = {floor_kind, orch_kind, aimdo_kind};
    std::shuffle(order, order + kinds, shuffle);
    block_time t[kinds]{};
    for (int k : order) {
      if (k == floor_kind) t[k] = time_block(block, [&](uint64_t n) { hits_floor(floor_value, n); });
      if (k == orch_kind) t[k] = time_block(block, [&](uint64_t n) { hits_orch(orch, n); });
      if (k == aimdo_kind) t[k] = time_block(block, [&](uint64_t n) { hits_aimdo(aimdo, n); });
    }
    for (int k = 0; k < kinds; ++k) {
      cpu[k].push_back(t[k].cpu_ns);
      wall[k].push_back(t[k].wall_ns);
    }
    ours_over_aimdo.push_back(t[orch_kind].cpu_ns / t[aimdo_kind].cpu_ns);
    ours_over_floor.push_back(t[orch_kind].cpu_ns / t[floor_kind].cpu_ns);
    aimdo_over_floor.push_back(t[aimdo_kind].cpu_ns / t[floor_kind].cpu_ns);
  }

  const spread ratio = spread_of(ours_over_aimdo);
  const spread of_floor[2] = {spread_of(ours_over_floor), spread_of(aimdo_over_floor)};
  if (json) {
    std::printf("{\"rounds\": %llu, \"block\": %llu, \"time\": \"thread CPU ns per hit\"",
                static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(block));
    for (int k = 0; k < kinds; ++k) {
      const spread c = spread_of(cpu[k]);
      const spread w = spread_of(wall[k]);
      std::printf(", \"%s\": {\"cpu_ns\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                  "\"wall_ns_median\": %.2f, \"rounds_cpu_ns\": [",
                  names[k], c.median, c.min, c.max, w.median);
      for (size_t i = 0; i < cpu[k].size(); ++i)
        std::printf("%s%.2f", i == 0 ? "" : ", ", cpu[k][i]);
      std::printf("]}");
    }
    std::printf(", \"ours_over_aimdo\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}",
                ratio.median, ratio.min, ratio.max);
    std::printf(", \"ours_over_floor\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}",
                of_floor[0].median, of_floor[0].min, of_floor[0].max);
    std::printf(", \"aimdo_over_floor\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}}\n",
                of_floor[1].median, of_floor[1].min, of_floor[1].max);
    return 0;
  }
  std::printf("%llu rounds of %llu hits each, interleaved in random order; thread CPU ns per hit\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(block));
  std::printf("%-30s %9s %9s %9s %12s\n", "", "median", "min", "max", "wall median");
  for (int k = 0; k < kinds; ++k) {
    const spread c = spread_of(cpu[k]);
    std::printf("%-30s %9.2f %9.2f %9.2f %12.2f\n", names[k], c.median, c.min, c.max,
                spread_of(wall[k]).median);
  }
  std::printf("ours / aimdo's (same round)    %9.3f %9.3f %9.3f\n", ratio.median, ratio.min,
              ratio.max);
  std::printf("ours / floor                   %9.3f %9.3f %9.3f\n", of_floor[0].median,
              of_floor[0].min, of_floor[0].max);
  std::printf("aimdo's / floor                %9.3f %9.3f %9.3f\n", of_floor[1].median,
              of_floor[1].min, of_floor[1].max);
  return 0;
}
