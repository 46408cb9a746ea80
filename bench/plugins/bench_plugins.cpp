// Plugin benchmarks on the sim device (docs/performance.md, "Plugins"):
//   BM_fault_unpin_hit      the per-layer hit path: fault + unpin of a resident page, per call
//                           (lock-free); _frozen_clock: the same with sim's clock frozen, so
//                           the poll throttle's clock read is a load instead of clock_gettime;
//   BM_evict_10000_pages    lowering a watermark over 10,000 resident pages (items = pages);
//   BM_cast_grow_reset      growing a cast buffer by 16 chunks of 16 MiB, then reset.
// Plugins go through the real loader, so every call crosses the C ABI as in production.
// Each has a floor measured in the same run (docs/performance.md):
//   BM_floor_two_atomic_increments  two uncontended atomic increments (the hit path's target is
//                                   1.5x this);
//   BM_floor_two_locked_calls   two indirect calls that each take an uncontended mutex;
//   BM_floor_sim_release_10000  the sim backend's own unmap + release of 10,000 pages;
//   BM_floor_sim_commit_16      the sim backend's reserve + 16 x (create + map) and back.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "orch/plugin/allocator.h"
#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;
constexpr uint64_t MiB = 1ull << 20;

struct floor_state {
  std::mutex mutex;
  uint64_t value = 0;
};

__attribute__((noinline)) void locked_increment(floor_state* f) {
  std::lock_guard lock(f->mutex);
  benchmark::DoNotOptimize(++f->value);
}

void BM_floor_two_locked_calls(benchmark::State& state) {
  floor_state f;
  void (*volatile call)(floor_state*) = locked_increment;
  for (auto _ : state) {
    call(&f);
    call(&f);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_floor_two_locked_calls);

void BM_floor_two_atomic_increments(benchmark::State& state) {
  std::atomic<uint64_t> value{0};
  for (auto _ : state) {
    value.fetch_add(1);
    value.fetch_add(1);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(value.load());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_floor_two_atomic_increments);

struct sim_rig {
  std::unique_ptr<plugin_library> backend;
  std::unique_ptr<plugin_library> pager_lib;
  const orch_pager_api* api = nullptr;
  orch_pager* pager = nullptr;
  int32_t fd = -1;

  sim_rig(uint64_t capacity, uint64_t page) {
    backend = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM, false).value();
    pager_lib = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM, false).value();
    (void)backend->init();
    (void)pager_lib->init();
    const auto* sim = static_cast<const orch_sim_api*>(backend->table().extension);
    orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, capacity, 2 * MiB, 0, 0};
    sim->create(&sc, &fd);
    api = pager_lib->table().pager_api;
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.sim_fd = fd;
    c.page_size = page;
    c.poll_interval_ms = -1;
    c.poll_floor = -1;
    api->device_open(&c, &pager);
  }
  ~sim_rig() {
    pager_lib->shutdown();
    close(fd);
  }
};

void fault_unpin_hit(benchmark::State& state, bool frozen_clock) {
  sim_rig rig(1024 * MiB, 32 * MiB);
  if (frozen_clock) {
    const auto* sim = static_cast<const orch_sim_api*>(rig.backend->table().extension);
    const orch_backend_api* be = rig.backend->table().backend_api;
    orch_device_config dc{sizeof(orch_device_config), 0, rig.fd, 0};
    orch_device* d = nullptr;
    be->device_open(&dc, &d);
    sim->set_clock(d, 1000000000ull);  // device-wide, in the sim segment
    be->device_close(d);
  }
  orch_region* r = nullptr;
  rig.api->region_create(rig.pager, 4 * 32 * MiB, &r, nullptr);
  uint64_t sig[1];
  size_t len = 0;
  rig.api->region_fault(r, 0, 32 * MiB, sig, 1, &len, nullptr);
  rig.api->region_unpin(r, 0, 32 * MiB);
  for (auto _ : state) {
    benchmark::DoNotOptimize(rig.api->region_fault(r, 0, 32 * MiB, sig, 1, &len, nullptr));
    rig.api->region_unpin(r, 0, 32 * MiB);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
void BM_fault_unpin_hit(benchmark::State& state) { fault_unpin_hit(state, false); }
void BM_fault_unpin_hit_frozen_clock(benchmark::State& state) { fault_unpin_hit(state, true); }
BENCHMARK(BM_fault_unpin_hit);
BENCHMARK(BM_fault_unpin_hit_frozen_clock);

void BM_evict_10000_pages(benchmark::State& state) {
  constexpr uint64_t pages = 10000;
  constexpr uint64_t page = 2 * MiB;
  sim_rig rig(pages * page + 1024 * MiB, page);  // room for every page plus the headroom
  orch_region* r = nullptr;
  rig.api->region_create(rig.pager, pages * page, &r, nullptr);
  for (auto _ : state) {
    state.PauseTiming();
    rig.api->region_prioritize(r);
    for (uint64_t i = 0; i < pages; ++i) {
      rig.api->region_fault(r, i * page, page, nullptr, 0, nullptr, nullptr);
      rig.api->region_unpin(r, i * page, page);
    }
    state.ResumeTiming();
    uint64_t freed = 0;
    rig.api->region_evict(r, pages * page, &freed);
    if (freed != pages * page) state.SkipWithError("eviction freed less than every page");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * pages));
}
BENCHMARK(BM_evict_10000_pages)->Unit(benchmark::kMicrosecond);

void BM_floor_sim_release_10000(benchmark::State& state) {
  constexpr uint64_t pages = 10000;
  constexpr uint64_t page = 2 * MiB;
  sim_rig rig(pages * page + 1024 * MiB, page);
  const orch_backend_api* be = rig.backend->table().backend_api;
  orch_device_config dc{sizeof(orch_device_config), 0, rig.fd, 0};
  orch_device* d = nullptr;
  be->device_open(&dc, &d);
  uint64_t va = 0;
  be->va_reserve(d, pages * page, &va);
  std::vector<uint64_t> handles(pages);
  for (auto _ : state) {
    state.PauseTiming();
    for (uint64_t i = 0; i < pages; ++i) {
      be->phys_create(d, page, &handles[i]);
      be->map(d, va + i * page, page, handles[i]);
    }
    state.ResumeTiming();
    for (uint64_t i = pages; i-- > 0;) {
      be->unmap(d, va + i * page, page);
      be->phys_release(d, handles[i]);
    }
  }
  be->device_close(d);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * pages));
}
BENCHMARK(BM_floor_sim_release_10000)->Unit(benchmark::kMicrosecond);

void BM_cast_grow_reset(benchmark::State& state) {
  sim_rig rig(4096 * MiB, 32 * MiB);
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_ALLOCATOR_SIM, false).value();
  (void)lib->init();
  const orch_allocator_api* api = lib->table().allocator_api;
  orch_allocator_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.streams = ORCH_ALLOC_STREAMS_DEFAULT;
  c.pager_api = rig.api;
  c.pager = rig.pager;
  orch_allocator* a = nullptr;
  api->open(&c, &a);
  for (auto _ : state) {
    uint64_t address = 0;
    if (api->cast_buffer(a, 0, 256 * MiB, &address) != ORCH_OK)
      state.SkipWithError("cast buffer growth failed");
    api->reset_cast_buffers(a);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 16));  // chunks
  lib->shutdown();
}
BENCHMARK(BM_cast_grow_reset)->Unit(benchmark::kMicrosecond);

void BM_floor_sim_commit_16(benchmark::State& state) {
  sim_rig rig(4096 * MiB, 32 * MiB);
  const orch_backend_api* be = rig.backend->table().backend_api;
  orch_device_config dc{sizeof(orch_device_config), 0, rig.fd, 0};
  orch_device* d = nullptr;
  be->device_open(&dc, &d);
  uint64_t handles[16];
  for (auto _ : state) {
    uint64_t va = 0;
    be->va_reserve(d, 16ull << 30, &va);
    for (uint64_t i = 0; i < 16; ++i) {
      be->phys_create(d, 16 * MiB, &handles[i]);
      be->map(d, va + i * 16 * MiB, 16 * MiB, handles[i]);
    }
    for (uint64_t i = 0; i < 16; ++i) {
      be->unmap(d, va + i * 16 * MiB, 16 * MiB);
      be->phys_release(d, handles[i]);
    }
    be->va_free(d, va, 16ull << 30);
  }
  be->device_close(d);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 16));
}
BENCHMARK(BM_floor_sim_commit_16)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
