// docs/plugin-abi.md "Lifecycle": every call made while a plugin is down answers
// ORCH_NOT_INITIALISED. Handles opened before a shutdown are freed by it, so these calls would be
// use-after-free if a plugin dereferenced them; under the asan preset a regression here is a
// sanitizer report, not just a wrong status.
#include <gtest/gtest.h>
#include <unistd.h>

#include "orch/plugin/allocator.h"
#include "orch/plugin/ledger.h"
#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr orch_status down = ORCH_NOT_INITIALISED;

std::unique_ptr<orch::plugins::plugin_library> load(const char* path) {
  auto lib = orch::plugins::plugin_library::open(path);
  EXPECT_TRUE(lib) << lib.err().message;
  return lib ? std::move(*lib) : nullptr;
}

// A sim device segment, created by a second instance of the backend plugin that stays up.
class sim_segment_fd {
 public:
  sim_segment_fd() {
    lib_ = load(ORCH_TEST_PLUGIN_BACKEND_SIM);
    EXPECT_TRUE(lib_->init());
    auto* sim = static_cast<const orch_sim_api*>(lib_->table().extension);
    orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 512 * MiB, 0, 0, 0};
    EXPECT_EQ(sim->create(&sc, &fd_), ORCH_OK);
  }
  ~sim_segment_fd() { close(fd_); }
  int32_t fd() const { return fd_; }

 private:
  std::unique_ptr<orch::plugins::plugin_library> lib_;
  int32_t fd_ = -1;
};

// The backend tests make their segment with the plugin under test: a second load of the same
// file is the same instance, so sim_segment_fd cannot be used here.
TEST(plugin_shutdown, a_backend_answers_not_initialised_before_init_and_after_shutdown) {
  auto lib = load(ORCH_TEST_PLUGIN_BACKEND_SIM);
  const orch_backend_api* be = lib->table().backend_api;
  auto* sim = static_cast<const orch_sim_api*>(lib->table().extension);
  orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 512 * MiB, 0, 0, 0};
  int32_t fd = -1;
  EXPECT_EQ(sim->create(&sc, &fd), down);
  int32_t count = 0;
  EXPECT_EQ(be->device_count(&count), down);
  ASSERT_TRUE(lib->init());
  ASSERT_EQ(sim->create(&sc, &fd), ORCH_OK);
  lib->shutdown();
  orch_device_config dc{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  EXPECT_EQ(be->device_open(&dc, &d), down);
  EXPECT_EQ(d, nullptr);
  close(fd);
}

TEST(plugin_shutdown, every_backend_call_on_a_device_after_shutdown_answers_not_initialised) {
  auto lib = load(ORCH_TEST_PLUGIN_BACKEND_SIM);
  ASSERT_TRUE(lib->init());
  const orch_backend_api* be = lib->table().backend_api;
  auto* sim = static_cast<const orch_sim_api*>(lib->table().extension);
  orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 512 * MiB, 0, 0, 0};
  int32_t fd = -1;
  ASSERT_EQ(sim->create(&sc, &fd), ORCH_OK);
  orch_device_config dc{sizeof(orch_device_config), 0, fd, 0};
  orch_device* d = nullptr;
  ASSERT_EQ(be->device_open(&dc, &d), ORCH_OK);
  uint64_t h = 0;
  ASSERT_EQ(be->phys_create(d, 2 * MiB, &h), ORCH_OK);
  lib->shutdown();  // closes d
  uint64_t x = 0;
  EXPECT_EQ(be->device_total_mem(d, &x), down);
  EXPECT_EQ(be->granularity(d, &x), down);
  EXPECT_EQ(be->mem_get_info(d, &x, nullptr), down);
  EXPECT_EQ(be->va_reserve(d, 2 * MiB, &x), down);
  EXPECT_EQ(be->va_free(d, 1, 2 * MiB), down);
  EXPECT_EQ(be->phys_create(d, 2 * MiB, &x), down);
  EXPECT_EQ(be->phys_release(d, h), down);
  EXPECT_EQ(be->map(d, 1, 2 * MiB, h), down);
  EXPECT_EQ(be->unmap(d, 1, 2 * MiB), down);
  EXPECT_EQ(be->synchronize(d), down);
  EXPECT_EQ(be->host_register(d, &x, sizeof x), down);
  EXPECT_EQ(be->host_unregister(d, &x), down);
  EXPECT_EQ(be->now_ns(d), 0u);
  EXPECT_EQ(be->host_pointer(d, 1), nullptr);
  EXPECT_EQ(sim->set_other_usage(d, 0), down);
  EXPECT_EQ(sim->inject_fault(d, ORCH_SIM_FAULT_MAP, 1), down);
  EXPECT_EQ(sim->set_clock(d, 1), down);
  EXPECT_EQ(sim->advance_clock(d, 1), down);
  EXPECT_EQ(sim->set_process_budget(d, 0), down);
  orch_sim_counters c{};
  c.struct_size = sizeof c;
  EXPECT_EQ(sim->counters(d, &c), down);
  EXPECT_EQ(sim->reclaim_dead(d, nullptr, nullptr), down);
  be->device_close(d);  // harmless
  // Shutdown gave the device's usage back, and a stale handle stays refused after a re-init.
  ASSERT_TRUE(lib->init());
  EXPECT_EQ(be->granularity(d, &x), ORCH_INVALID);
  orch_device* fresh = nullptr;
  ASSERT_EQ(be->device_open(&dc, &fresh), ORCH_OK);
  ASSERT_EQ(sim->counters(fresh, &c), ORCH_OK);
  EXPECT_EQ(c.used_bytes, 0u);
  close(fd);
}

TEST(plugin_shutdown, every_pager_call_after_shutdown_answers_not_initialised) {
  sim_segment_fd seg;
  auto lib = load(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(lib->init());
  const orch_pager_api* api = lib->table().pager_api;
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.sim_fd = seg.fd();
  c.poll_interval_ms = -1;
  c.poll_floor = -1;
  orch_pager* p = nullptr;
  ASSERT_EQ(api->device_open(&c, &p), ORCH_OK);
  orch_region* r = nullptr;
  ASSERT_EQ(api->region_create(p, 64 * MiB, &r, nullptr), ORCH_OK);
  lib->shutdown();  // frees p and r
  uint64_t x = 0;
  int64_t deficit = 0;
  uint8_t flags[64];
  size_t len = 0;
  orch_region_info ri{};
  ri.struct_size = sizeof ri;
  orch_pager_usage u{};
  u.struct_size = sizeof u;
  orch_pager_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(api->device_open(&c, &p), down);
  EXPECT_EQ(api->set_simple_headroom(0), down);
  EXPECT_EQ(api->get_simple_headroom(&x), down);
  EXPECT_EQ(api->set_budget_cap(p, 0), down);
  EXPECT_EQ(api->set_pressure_source(p, ORCH_PRESSURE_DEFAULT), down);
  EXPECT_EQ(api->set_log_callback(nullptr, nullptr), down);
  orch_region* r2 = nullptr;
  EXPECT_EQ(api->region_create(p, 64 * MiB, &r2, nullptr), down);
  EXPECT_EQ(api->region_info(r, &ri), down);
  EXPECT_EQ(api->region_prioritize(r), down);
  EXPECT_EQ(api->region_deprioritize(r), down);
  EXPECT_EQ(api->region_fault(r, 0, 1, nullptr, 0, nullptr, nullptr), down);
  EXPECT_EQ(api->region_unpin(r, 0, 1), down);
  EXPECT_EQ(api->region_set_watermark(r, 0), down);
  EXPECT_EQ(api->region_set_watermark_limit(r, 0), down);
  EXPECT_EQ(api->region_evict(r, 1, &x), down);
  EXPECT_EQ(api->region_residency(r, flags, sizeof flags, &len), down);
  EXPECT_EQ(api->region_resident_bytes(r, &x), down);
  EXPECT_EQ(api->reset_watermark_limits(p), down);
  EXPECT_EQ(api->reclaim(p, 1, 0, &x), down);
  EXPECT_EQ(api->resident_bytes(p, &x), down);
  EXPECT_EQ(api->pinned_bytes(p, &x), down);
  EXPECT_EQ(api->budget_deficit(p, 0, &deficit), down);
  EXPECT_EQ(api->poll(p), down);
  EXPECT_EQ(api->account_external(p, 0), down);
  EXPECT_EQ(api->usage(p, &u), down);
  EXPECT_EQ(api->stats(p, &st), down);
  EXPECT_EQ(api->backend(p), nullptr);
  EXPECT_EQ(api->device(p), nullptr);
  api->region_destroy(r);  // harmless
  api->device_close(p);
  // After a re-init the old handles are strangers, not live objects.
  ASSERT_TRUE(lib->init());
  EXPECT_EQ(api->stats(p, &st), ORCH_INVALID);
  EXPECT_EQ(api->region_info(r, &ri), ORCH_INVALID);
}

TEST(plugin_shutdown, a_region_is_refused_after_its_pager_is_closed) {
  sim_segment_fd seg;
  auto lib = load(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(lib->init());
  const orch_pager_api* api = lib->table().pager_api;
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.sim_fd = seg.fd();
  orch_pager* p = nullptr;
  ASSERT_EQ(api->device_open(&c, &p), ORCH_OK);
  orch_region* r = nullptr;
  ASSERT_EQ(api->region_create(p, 64 * MiB, &r, nullptr), ORCH_OK);
  api->device_close(p);
  orch_region_info ri{};
  ri.struct_size = sizeof ri;
  EXPECT_EQ(api->region_info(r, &ri), ORCH_INVALID);
  EXPECT_EQ(api->region_info(reinterpret_cast<orch_region*>(p), &ri), ORCH_INVALID);
  api->region_destroy(r);
}

TEST(plugin_shutdown, every_ledger_call_after_shutdown_answers_not_initialised) {
  auto lib = load(ORCH_TEST_PLUGIN_LEDGER_SIM);
  ASSERT_TRUE(lib->init());
  const orch_ledger_api* api = lib->table().ledger_api;
  orch_ledger_config c{sizeof(orch_ledger_config), 0, 1024 * MiB};
  orch_ledger* l = nullptr;
  ASSERT_EQ(api->open(&c, &l), ORCH_OK);
  orch_ledger_model* m = nullptr;
  ASSERT_EQ(api->model_add(l, 64 * MiB, &m), ORCH_OK);
  lib->shutdown();  // frees l and m
  uint64_t x = 0;
  orch_ledger_model_info mi{};
  mi.struct_size = sizeof mi;
  orch_ledger_stats st{};
  st.struct_size = sizeof st;
  orch_ledger_model* m2 = nullptr;
  EXPECT_EQ(api->open(&c, &l), down);
  EXPECT_EQ(api->set_budget(l, 0), down);
  EXPECT_EQ(api->model_add(l, 64 * MiB, &m2), down);
  EXPECT_EQ(api->model_set_refcount(m, 1), down);
  EXPECT_EQ(api->model_load(m, 0.0, &x), down);
  EXPECT_EQ(api->model_unload(m, &x), down);
  EXPECT_EQ(api->model_info(m, &mi), down);
  EXPECT_EQ(api->free_memory(l, 1, &x), down);
  EXPECT_EQ(api->stats(l, &st), down);
  api->model_remove(m);  // harmless
  api->close(l);
}

TEST(plugin_shutdown, every_allocator_call_after_shutdown_answers_not_initialised) {
  auto lib = load(ORCH_TEST_PLUGIN_ALLOCATOR_CPU);
  ASSERT_TRUE(lib->init());
  const orch_allocator_api* api = lib->table().allocator_api;
  orch_allocator_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.streams = ORCH_ALLOC_STREAMS_DEFAULT;
  orch_allocator* a = nullptr;
  ASSERT_EQ(api->open(&c, &a), ORCH_OK);
  lib->shutdown();  // frees a
  uint64_t x = 0;
  orch_cast_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(api->open(&c, &a), down);
  EXPECT_EQ(api->cast_buffer(a, 0, MiB, &x), down);
  EXPECT_EQ(api->reset_cast_buffers(a), down);
  EXPECT_EQ(api->cast_stats(a, &st), down);
  api->close(a);  // harmless
}

}  // namespace
