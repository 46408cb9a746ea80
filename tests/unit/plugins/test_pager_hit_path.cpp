// The pager's lock-free hit path (plugins/src/pager/pager_fast_path.cpp) against the locked side:
// it takes no lock, a page it pins is never freed by a racing eviction, a race with
// region_destroy ends in OK or INVALID and nothing else, and region_destroy syncs after its last
// free. Real plugins through the real loader on a sim device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;
constexpr uint64_t page = 32ull << 20;

// What the release reports see: the pager sends them while it holds its mutex.
struct observer {
  const orch_sim_api* sim = nullptr;
  orch_device* control = nullptr;
  std::vector<uint64_t> syncs_at_release;
  std::function<void()> on_first_release;
};

void on_release(void* ctx, const orch_release_report* /*report*/) {
  auto* o = static_cast<observer*>(ctx);
  if (o->control != nullptr) {
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    o->sim->counters(o->control, &c);
    o->syncs_at_release.push_back(c.syncs);
  }
  if (o->on_first_release) std::exchange(o->on_first_release, nullptr)();
}

class pager_hit_path : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM).value();
    lib_ = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM).value();
    ASSERT_TRUE(backend_->init());
    const orch_host_services host{
        sizeof(orch_host_services), 0, &obs_, nullptr, nullptr, on_release};
    ASSERT_TRUE(lib_->init(&host));
    api_ = lib_->table().pager_api;
    obs_.sim = static_cast<const orch_sim_api*>(backend_->table().extension);
    orch_sim_config sc{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 1ull << 30, 0, 0, 0};
    ASSERT_EQ(obs_.sim->create(&sc, &fd_), ORCH_OK);
    const orch_backend_api* be = backend_->table().backend_api;
    orch_device_config dc{sizeof(orch_device_config), 0, fd_, 0};
    ASSERT_EQ(be->device_open(&dc, &control_), ORCH_OK);
    // A frozen clock: no poll falls due in the middle of a test on a slow machine.
    ASSERT_EQ(obs_.sim->set_clock(control_, 1000000000ull), ORCH_OK);
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.sim_fd = fd_;
    c.poll_interval_ms = -1;
    c.poll_floor = -1;
    ASSERT_EQ(api_->device_open(&c, &pager_), ORCH_OK);
  }

  void TearDown() override {
    lib_->shutdown();
    if (control_ != nullptr) backend_->table().backend_api->device_close(control_);
    close(fd_);
  }

  orch_region* region(uint64_t pages) {
    orch_region* r = nullptr;
    EXPECT_EQ(api_->region_create(pager_, pages * page, &r, nullptr), ORCH_OK);
    return r;
  }

  orch_region_info info(orch_region* r) {
    orch_region_info i{};
    i.struct_size = sizeof i;
    EXPECT_EQ(api_->region_info(r, &i), ORCH_OK);
    return i;
  }

  // Maps pages [first, first + n) with a locked fault and unpins them: the next fault of the
  // range is a hit.
  void make_resident(orch_region* r, uint64_t first, uint64_t n) {
    ASSERT_EQ(api_->region_fault(r, first * page, n * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    ASSERT_EQ(api_->region_unpin(r, first * page, n * page), ORCH_OK);
  }

  std::vector<uint8_t> residency(orch_region* r) {
    std::vector<uint8_t> flags(info(r).nr_pages);
    size_t len = 0;
    EXPECT_EQ(api_->region_residency(r, flags.data(), flags.size(), &len), ORCH_OK);
    return flags;
  }

  orch_sim_counters counters() {
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    EXPECT_EQ(obs_.sim->counters(control_, &c), ORCH_OK);
    return c;
  }

  observer obs_;
  std::unique_ptr<plugin_library> backend_;
  std::unique_ptr<plugin_library> lib_;
  const orch_pager_api* api_ = nullptr;
  orch_pager* pager_ = nullptr;
  orch_device* control_ = nullptr;
  int32_t fd_ = -1;
};

// Made deterministic as in test_pager_lock: an eviction reports its release while it holds the
// pager mutex, and from inside that report another thread faults and unpins a resident page. A
// hit path that took the pager mutex (or waited for the registry) would never return. The
// future's bound only keeps a regression from hanging the suite; passing does not depend on it.
TEST_F(pager_hit_path, a_hit_runs_while_another_thread_holds_the_pager_mutex) {
  orch_region* hot = region(4);
  orch_region* cold = region(4);
  ASSERT_EQ(api_->region_fault(hot, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  ASSERT_EQ(api_->region_unpin(hot, 0, page), ORCH_OK);
  ASSERT_EQ(api_->region_fault(cold, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  ASSERT_EQ(api_->region_unpin(cold, 0, page), ORCH_OK);
  std::atomic<int> fault_status{-1};
  std::atomic<int> unpin_status{-1};
  bool finished = false;
  obs_.on_first_release = [&] {
    auto done = std::async(std::launch::async, [&] {
      fault_status = api_->region_fault(hot, 0, page, nullptr, 0, nullptr, nullptr);
      unpin_status = api_->region_unpin(hot, 0, page);
    });
    finished = done.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    if (!finished) std::abort();  // a deadlock: the hit path took a lock
  };
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(cold, page, &freed), ORCH_OK);  // reports under the mutex
  EXPECT_TRUE(finished);
  EXPECT_EQ(freed, page);
  EXPECT_EQ(fault_status.load(), ORCH_OK);
  EXPECT_EQ(unpin_status.load(), ORCH_OK);
  orch_pager_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(api_->stats(pager_, &s), ORCH_OK);
  EXPECT_EQ(s.faults, 3u);
  EXPECT_EQ(s.hits, 1u);
}

// One thread faults and unpins resident pages (the hit path) while another evicts the whole
// region and prioritises it again. Every fault that answers OK must find its page resident and
// pinned, and at the end no page may be left resident above the watermark, nor the books off.
TEST_F(pager_hit_path, a_page_pinned_by_a_hit_is_never_freed_by_a_racing_eviction) {
  constexpr uint64_t pages = 4;
  orch_region* r = region(pages);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> hits{0};
  std::thread model([&] {
    uint8_t flags[pages];
    size_t len = 0;
    for (uint64_t n = 0; n < 20000 && bad == 0; ++n) {
      const uint64_t i = n % pages;
      const orch_status st = api_->region_fault(r, i * page, page, nullptr, 0, nullptr, nullptr);
      if (st == ORCH_OK) {
        ++hits;
        if (api_->region_residency(r, flags, pages, &len) != ORCH_OK ||
            flags[i] != (ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED))
          ++bad;
        if (api_->region_unpin(r, i * page, page) != ORCH_OK) ++bad;
      } else if (st != ORCH_OOM_RETRYABLE) {
        ++bad;
      }
      if (i == pages - 1) api_->region_prioritize(r);
    }
    stop = true;
  });
  std::thread evictor([&] {
    while (!stop) {
      uint64_t freed = 0;
      if (api_->region_evict(r, UINT64_MAX, &freed) != ORCH_OK) ++bad;
      if (api_->region_prioritize(r) != ORCH_OK) ++bad;
    }
  });
  model.join();
  evictor.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0u);
  const orch_region_info i = info(r);
  EXPECT_EQ(i.pinned_pages, 0u);
  uint8_t flags[pages];
  size_t len = 0;
  ASSERT_EQ(api_->region_residency(r, flags, pages, &len), ORCH_OK);
  for (uint64_t p = i.watermark; p < pages; ++p) EXPECT_EQ(flags[p], 0u) << "page " << p;
  uint64_t resident = 0;
  ASSERT_EQ(api_->resident_bytes(pager_, &resident), ORCH_OK);
  EXPECT_EQ(resident, i.resident_pages * page);
  EXPECT_EQ(counters().process_used_bytes, resident);
}

// A thread hammers the hit path of a region while the main thread destroys it. Each call
// answers OK (ordered before the destroy) or INVALID (after), never anything else, and never OK
// again once INVALID; the destroy frees every page.
TEST_F(pager_hit_path, a_hit_racing_region_destroy_answers_ok_or_invalid) {
  for (int round = 0; round < 20; ++round) {
    orch_region* r = region(2);
    ASSERT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    ASSERT_EQ(api_->region_unpin(r, 0, 2 * page), ORCH_OK);
    std::atomic<uint64_t> calls{0};
    std::atomic<int> bad{0};
    std::thread model([&] {
      bool invalid = false;
      while (!invalid) {
        const uint64_t i = calls++ % 2;
        const orch_status st = api_->region_fault(r, i * page, page, nullptr, 0, nullptr, nullptr);
        if (st == ORCH_INVALID) {
          invalid = true;
        } else if (st != ORCH_OK) {
          ++bad;
        } else {
          const orch_status un = api_->region_unpin(r, i * page, page);
          if (un == ORCH_INVALID)
            invalid = true;
          else if (un != ORCH_OK)
            ++bad;
        }
      }
      // After the first INVALID the handle stays dead.
      if (api_->region_fault(r, 0, page, nullptr, 0, nullptr, nullptr) != ORCH_INVALID) ++bad;
      if (api_->region_unpin(r, 0, page) != ORCH_INVALID) ++bad;
    });
    while (calls.load() < 1000) std::this_thread::yield();
    api_->region_destroy(r);
    model.join();
    EXPECT_EQ(bad.load(), 0) << "round " << round;
    EXPECT_EQ(counters().process_used_bytes, 0u);
  }
}

// vbar_free syncs, frees, and syncs again (aimdo §2.1); docs/plugin-abi.md promises the sync
// after freeing. The release reports record the sim's sync count as each page goes.
TEST_F(pager_hit_path, region_destroy_syncs_after_its_last_release) {
  orch_region* r = region(4);
  ASSERT_EQ(api_->region_fault(r, 0, 3 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  const uint64_t before = counters().syncs;
  obs_.control = control_;
  api_->region_destroy(r);
  obs_.control = nullptr;
  ASSERT_EQ(obs_.syncs_at_release.size(), 3u);
  EXPECT_EQ(obs_.syncs_at_release.front(), before + 1);           // synced before the first free
  EXPECT_EQ(counters().syncs, obs_.syncs_at_release.back() + 1);  // and once after the last
}

// A hit pins without writing the page (plugins/src/pager/hit_pins.hpp): every read-out still
// counts the page as pinned, an eviction walks past it, and its unpin frees it.
TEST_F(pager_hit_path, a_hit_pinned_page_is_pinned_for_the_locked_side) {
  orch_region* r = region(2);
  make_resident(r, 0, 2);
  ASSERT_EQ(api_->region_fault(r, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);  // a hit
  EXPECT_EQ(info(r).pinned_pages, 1u);
  EXPECT_EQ(residency(r)[0], ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED);
  uint64_t pinned = 0;
  ASSERT_EQ(api_->pinned_bytes(pager_, &pinned), ORCH_OK);
  EXPECT_EQ(pinned, page);
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(r, 2 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, page);  // page 1 only
  EXPECT_EQ(info(r).watermark, 0u);
  EXPECT_EQ(residency(r)[0], ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED);
  ASSERT_EQ(api_->region_unpin(r, 0, page), ORCH_OK);  // the last pin, above the watermark
  EXPECT_EQ(residency(r)[0], 0u);
  EXPECT_EQ(info(r).pinned_pages, 0u);
  EXPECT_EQ(counters().process_used_bytes, 0u);
}

// An unpin need not match its fault: two pages faulted together, unpinned one at a time.
TEST_F(pager_hit_path, an_unpin_over_another_range_than_its_fault_unpins_each_page_once) {
  orch_region* r = region(3);
  make_resident(r, 0, 3);
  ASSERT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  ASSERT_EQ(api_->region_fault(r, page, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, 3u);
  ASSERT_EQ(api_->region_unpin(r, 0, page), ORCH_OK);
  EXPECT_EQ(residency(r)[0], ORCH_PAGE_RESIDENT);
  EXPECT_EQ(residency(r)[1], ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED);  // the second fault's
  ASSERT_EQ(api_->region_unpin(r, page, page), ORCH_OK);
  ASSERT_EQ(api_->region_unpin(r, page, page), ORCH_OK);
  ASSERT_EQ(api_->region_unpin(r, 2 * page, page), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, 0u);
  ASSERT_EQ(api_->region_unpin(r, 0, 3 * page), ORCH_OK);  // saturates, as aimdo
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(r, 3 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, 3 * page);
}

// A fault on one thread, its unpin on another.
TEST_F(pager_hit_path, a_hit_unpinned_by_another_thread_is_unpinned) {
  orch_region* r = region(1);
  make_resident(r, 0, 1);
  std::thread([&] {
    EXPECT_EQ(api_->region_fault(r, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  }).join();
  EXPECT_EQ(info(r).pinned_pages, 1u);
  ASSERT_EQ(api_->region_unpin(r, 0, page), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, 0u);
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(r, page, &freed), ORCH_OK);
  EXPECT_EQ(freed, page);
}

// A word pin (a locked fault's) and another thread's hit on an overlapping range: each unpin
// takes one pin, whichever it finds, and after two faults and two unpins nothing is pinned.
TEST_F(pager_hit_path, word_pins_and_another_threads_hit_pin_balance) {
  orch_region* r = region(2);
  make_resident(r, 1, 1);
  ASSERT_EQ(api_->region_fault(r, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);  // a miss
  std::thread([&] {
    EXPECT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);  // a hit
  }).join();
  ASSERT_EQ(api_->region_unpin(r, 0, 2 * page), ORCH_OK);  // the other thread's fault
  ASSERT_EQ(api_->region_unpin(r, 0, page), ORCH_OK);      // this thread's
  EXPECT_EQ(info(r).pinned_pages, 0u);
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(r, 2 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, 2 * page);
}

// Another thread's hit, unpinned here one page at a time.
TEST_F(pager_hit_path, another_threads_hit_unpinned_page_by_page_is_unpinned) {
  orch_region* r = region(2);
  make_resident(r, 0, 2);
  std::thread([&] {
    EXPECT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  }).join();
  ASSERT_EQ(api_->region_unpin(r, 0, page), ORCH_OK);
  ASSERT_EQ(api_->region_unpin(r, page, page), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, 0u);
}

// The owner clears its record while another thread's unpin takes one of the owner's records
// over: two faults, two unpins at the same moment, and not one pin may be left, round after
// round (a plain clear racing a take once consumed the same record twice).
TEST_F(pager_hit_path, an_owners_unpin_racing_another_threads_unpin_leaves_no_pin) {
  orch_region* r = region(2);
  make_resident(r, 0, 2);
  std::atomic<int> round{0};
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::thread other([&] {
    for (int mine = 1;; ++mine) {
      while (round.load() < mine && !stop) std::this_thread::yield();
      if (stop) return;
      EXPECT_EQ(api_->region_unpin(r, 0, 2 * page), ORCH_OK);
      done.store(mine);
    }
  });
  int leaked = 0;
  for (int n = 1; n <= 5000 && leaked == 0; ++n) {
    ASSERT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    ASSERT_EQ(api_->region_fault(r, 0, 2 * page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    round.store(n);
    ASSERT_EQ(api_->region_unpin(r, 0, 2 * page), ORCH_OK);
    while (done.load() != n) std::this_thread::yield();
    if (info(r).pinned_pages != 0) leaked = n;
  }
  stop = true;
  other.join();
  EXPECT_EQ(leaked, 0) << "pins left after round " << leaked;
}

// More faults outstanding than a thread has records: the rest pin in the page words, and every
// unpin finds its pin wherever it is.
TEST_F(pager_hit_path, more_outstanding_hits_than_records_all_pin_and_unpin) {
  constexpr uint64_t pages = 10;  // a thread has 8 records
  orch_region* r = region(pages);
  make_resident(r, 0, pages);
  for (uint64_t i = 0; i < pages; ++i)
    ASSERT_EQ(api_->region_fault(r, i * page, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, pages);
  for (uint64_t i = 0; i < pages; ++i) ASSERT_EQ(api_->region_unpin(r, i * page, page), ORCH_OK);
  EXPECT_EQ(info(r).pinned_pages, 0u);
  orch_pager_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(api_->stats(pager_, &s), ORCH_OK);
  EXPECT_EQ(s.faults, 1u + pages);
  EXPECT_EQ(s.hits, pages);  // the locked fault's were misses
}

// A region destroyed while a hit still holds its page leaves no pin behind for the next region
// (which may be allocated at the same address).
TEST_F(pager_hit_path, a_region_destroyed_under_a_hit_pin_leaves_no_pin_behind) {
  for (int round = 0; round < 5; ++round) {
    orch_region* r = region(2);
    make_resident(r, 0, 2);
    ASSERT_EQ(api_->region_fault(r, 0, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    api_->region_destroy(r);
    EXPECT_EQ(counters().process_used_bytes, 0u);
  }
  orch_region* next = region(2);
  make_resident(next, 0, 2);
  EXPECT_EQ(info(next).pinned_pages, 0u);
  uint64_t freed = 0;
  ASSERT_EQ(api_->region_evict(next, 2 * page, &freed), ORCH_OK);
  EXPECT_EQ(freed, 2 * page);
}

// Several model threads fault and unpin two-page ranges while another thread lowers the
// watermark by every means there is (evict, set_watermark, reclaim) and raises it again. A fault
// that answers OK finds its pages resident and pinned; at the end nothing is pinned, nothing is
// resident above the watermark, and the books agree with the device. Each model goes on until it
// has hit 50 times: a fixed number of attempts could all fall while the lowerer, preempted on a
// loaded machine, held the watermark low (no hit at all, once in nine loaded runs).
TEST_F(pager_hit_path, hits_on_many_threads_survive_every_kind_of_lowering) {
  constexpr uint64_t pages = 6;
  orch_region* r = region(pages);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> hits{0};
  auto model = [&](uint64_t seed) {
    uint8_t flags[pages];
    size_t len = 0;
    uint64_t mine = 0;
    // Only a pager that never answers OK reaches the cap.
    for (uint64_t n = 0; (n < 20000 || mine < 50) && n < 100'000'000 && bad == 0; ++n) {
      const uint64_t i = (n * 7 + seed) % (pages - 1);
      const orch_status st =
          api_->region_fault(r, i * page, 2 * page, nullptr, 0, nullptr, nullptr);
      if (st == ORCH_OK) {
        ++hits;
        ++mine;
        if (api_->region_residency(r, flags, pages, &len) != ORCH_OK ||
            (flags[i] & flags[i + 1]) != (ORCH_PAGE_RESIDENT | ORCH_PAGE_PINNED))
          ++bad;
        if (api_->region_unpin(r, i * page, 2 * page) != ORCH_OK) ++bad;
      } else if (st != ORCH_OOM_RETRYABLE) {
        ++bad;
      }
    }
  };
  std::thread a(model, 0), b(model, 3);
  std::thread lowerer([&] {
    for (uint64_t n = 0; !stop; ++n) {
      uint64_t freed = 0;
      orch_status st = ORCH_OK;
      switch (n % 3) {
        case 0:
          st = api_->region_evict(r, 2 * page, &freed);
          break;
        case 1:
          st = api_->region_set_watermark(r, page);
          break;
        case 2:
          st = api_->reclaim(pager_, 3 * page, 0, &freed);
          break;
      }
      if (st != ORCH_OK || api_->region_prioritize(r) != ORCH_OK) ++bad;
    }
  });
  a.join();
  b.join();
  stop = true;
  lowerer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0u);
  const orch_region_info i = info(r);
  EXPECT_EQ(i.pinned_pages, 0u);
  const std::vector<uint8_t> flags = residency(r);
  for (uint64_t p = i.watermark; p < pages; ++p) EXPECT_EQ(flags[p], 0u) << "page " << p;
  uint64_t resident = 0;
  ASSERT_EQ(api_->resident_bytes(pager_, &resident), ORCH_OK);
  EXPECT_EQ(resident, i.resident_pages * page);
  EXPECT_EQ(counters().process_used_bytes, resident);
}

}  // namespace
