// Pager lock (docs/references.md, aimdo §4.8, §6.1): an allocation path's reclaim try-locks and
// never waits for a model thread that holds the pager. Made deterministic by reclaiming from
// inside the release report, which the pager sends while it holds its lock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;
constexpr uint64_t lock_page = 32ull << 20;

struct probe {
  const orch_pager_api* api = nullptr;
  orch_pager* pager = nullptr;
  int reports = 0;
  orch_status try_status = ORCH_OK;
  uint64_t try_freed = 99;
};

void reclaim_in_release(void* ctx, const orch_release_report* /*report*/) {
  auto* p = static_cast<probe*>(ctx);
  if (p->reports++ != 0) return;
  // Another thread, as an allocator hook would be, while this one holds the pager lock.
  std::thread hook([p] {
    p->try_status = p->api->reclaim(p->pager, lock_page, ORCH_RECLAIM_TRY_LOCK, &p->try_freed);
  });
  hook.join();  // returns: the try-lock did not wait
}

TEST(pager_lock, reclaim_from_an_allocation_path_never_waits_for_the_pager_lock) {
  auto backend = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM);
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(backend && lib);
  ASSERT_TRUE((*backend)->init());
  probe p;
  const orch_host_services host{sizeof(orch_host_services), 0, &p, nullptr, nullptr, reclaim_in_release};
  ASSERT_TRUE((*lib)->init(&host));
  p.api = (*lib)->table().pager_api;
  const auto* sim = static_cast<const orch_sim_api*>((*backend)->table().extension);
  orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 1ull << 30, 0, 0, 0};
  int32_t fd = -1;
  ASSERT_EQ(sim->create(&sc, &fd), ORCH_OK);
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.sim_fd = fd;
  c.poll_interval_ms = -1;
  c.poll_floor = -1;
  ASSERT_EQ(p.api->device_open(&c, &p.pager), ORCH_OK);
  orch_region* r = nullptr;
  ASSERT_EQ(p.api->region_create(p.pager, 4 * lock_page, &r, nullptr), ORCH_OK);
  ASSERT_EQ(p.api->region_fault(r, 0, 2 * lock_page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  ASSERT_EQ(p.api->region_unpin(r, 0, 2 * lock_page), ORCH_OK);
  uint64_t freed = 0;
  ASSERT_EQ(p.api->region_evict(r, 2 * lock_page, &freed), ORCH_OK);  // reports under the lock
  EXPECT_EQ(freed, 2 * lock_page);
  EXPECT_EQ(p.reports, 2);
  EXPECT_EQ(p.try_status, ORCH_BUSY) << "held by the model thread: not an out-of-memory answer";
  EXPECT_EQ(p.try_freed, 0u);
  (*lib)->shutdown();
  close(fd);
}

}  // namespace
