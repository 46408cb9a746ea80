// Appended structs across the plugin ABI (docs/plugin-abi.md, "Rules"): every reader checks a
// field with ORCH_HAS_FIELD before it reads it, so a struct from an older caller or plugin (a
// shorter prefix) is read as far as it goes, and a newer caller's longer struct gets the fields
// this side knows with the rest left as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "orch/plugin/allocator.h"
#include "orch/plugin/ledger.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;
constexpr uint64_t region_page = 32ull << 20;

TEST(struct_prefixes, has_field_holds_exactly_for_the_fields_struct_size_reaches) {
  orch_pager_stats s{};
  s.struct_size = offsetof(orch_pager_stats, evictions);  // stops before evictions
  EXPECT_TRUE(ORCH_HAS_FIELD(&s, struct_size));
  EXPECT_TRUE(ORCH_HAS_FIELD(&s, oom_returns));
  EXPECT_FALSE(ORCH_HAS_FIELD(&s, evictions));
  EXPECT_FALSE(ORCH_HAS_FIELD(&s, errors));
  s.struct_size = offsetof(orch_pager_stats, evictions) + sizeof(uint64_t) - 1;  // part of it
  EXPECT_FALSE(ORCH_HAS_FIELD(&s, evictions));
  s.struct_size = sizeof s;
  EXPECT_TRUE(ORCH_HAS_FIELD(&s, errors));
  orch_host_services h{};
  h.struct_size = 0;
  EXPECT_FALSE(ORCH_HAS_FIELD(&h, ctx));
}

// A sim pager on a fresh 1 GiB sim device, its plugin started with `host`.
struct pager_rig {
  std::unique_ptr<plugin_library> backend;
  std::unique_ptr<plugin_library> lib;
  const orch_pager_api* api = nullptr;
  orch_pager* pager = nullptr;
  int32_t fd = -1;

  void start(const orch_host_services* host) {
    auto b = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM);
    auto l = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
    ASSERT_TRUE(b && l);
    backend = std::move(*b);
    lib = std::move(*l);
    ASSERT_TRUE(backend->init());
    ASSERT_TRUE(lib->init(host));
    api = lib->table().pager_api;
    const auto* sim = static_cast<const orch_sim_api*>(backend->table().extension);
    const orch_sim_config sc{.struct_size = sizeof(orch_sim_config),
                             .free_mode = ORCH_SIM_FREE_DEVICE,
                             .capacity = 1ull << 30,
                             .granularity = 0,
                             .backing_store = 0,
                             .runtime_version = 0};
    ASSERT_EQ(sim->create(&sc, &fd), ORCH_OK);
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.sim_fd = fd;
    c.poll_interval_ms = -1;
    c.poll_floor = -1;
    ASSERT_EQ(api->device_open(&c, &pager), ORCH_OK);
  }
  // Faults, unpins and evicts two pages: one release report.
  void evict_two_pages() {
    orch_region* r = nullptr;
    ASSERT_EQ(api->region_create(pager, 4 * region_page, &r, nullptr), ORCH_OK);
    ASSERT_EQ(api->region_fault(r, 0, 2 * region_page, nullptr, 0, nullptr, nullptr), ORCH_OK);
    ASSERT_EQ(api->region_unpin(r, 0, 2 * region_page), ORCH_OK);
    uint64_t freed = 0;
    ASSERT_EQ(api->region_evict(r, 2 * region_page, &freed), ORCH_OK);
    EXPECT_EQ(freed, 2 * region_page);
  }
  ~pager_rig() {
    if (lib) lib->shutdown();
    if (fd >= 0) close(fd);
  }
};

void count_report(void* ctx, const orch_release_report* /*report*/) { ++*static_cast<int*>(ctx); }

TEST(struct_prefixes, a_plugin_reads_an_older_hosts_services_only_as_far_as_they_go) {
  int reports = 0;
  // A host built before report_release existed: the pointer after its struct is not its own.
  const orch_host_services older{.struct_size = offsetof(orch_host_services, report_release),
                                 .reserved0 = 0,
                                 .ctx = &reports,
                                 .log = nullptr,
                                 .now_ns = nullptr,
                                 .report_release = count_report};
  {
    pager_rig rig;
    ASSERT_NO_FATAL_FAILURE(rig.start(&older));
    ASSERT_NO_FATAL_FAILURE(rig.evict_two_pages());
  }
  EXPECT_EQ(reports, 0);
  orch_host_services current = older;
  current.struct_size = sizeof current;
  {
    pager_rig rig;
    ASSERT_NO_FATAL_FAILURE(rig.start(&current));
    ASSERT_NO_FATAL_FAILURE(rig.evict_two_pages());
  }
  EXPECT_GT(reports, 0);
}

// A caller built against a later minor, whose stats struct has grown: the pager fills what it
// knows, leaves the rest and the caller's struct_size alone.
TEST(struct_prefixes, a_newer_callers_longer_struct_gets_the_fields_the_plugin_knows) {
  pager_rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.start(nullptr));
  ASSERT_NO_FATAL_FAILURE(rig.evict_two_pages());
  struct newer_stats {
    orch_pager_stats known;
    uint64_t appended;
  } s{};
  std::memset(&s, 0x5a, sizeof s);
  s.known.struct_size = sizeof s;
  ASSERT_EQ(rig.api->stats(rig.pager, &s.known), ORCH_OK);
  EXPECT_EQ(s.known.struct_size, sizeof s);
  EXPECT_EQ(s.known.misses, 2u);
  EXPECT_EQ(s.known.evictions, 2u);
  EXPECT_EQ(s.appended, 0x5a5a5a5a5a5a5a5aull);
  // Shorter than ABI 1's struct is no prefix of it: refused, nothing written.
  orch_pager_stats short_stats{};
  short_stats.struct_size = offsetof(orch_pager_stats, errors);
  EXPECT_EQ(rig.api->stats(rig.pager, &short_stats), ORCH_INVALID);
  EXPECT_EQ(short_stats.faults, 0u);
}

// An allocator config from a caller built before backend_api and device were appended: read up
// to the pager it names, as ABI 1.0 wrote it.
TEST(struct_prefixes, an_older_allocator_config_is_read_without_its_appended_fields) {
  pager_rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.start(nullptr));
  auto alloc = plugin_library::open(ORCH_TEST_PLUGIN_ALLOCATOR_SIM);
  ASSERT_TRUE(alloc) << alloc.err().message;
  ASSERT_TRUE((*alloc)->init());
  const orch_allocator_api* api = (*alloc)->table().allocator_api;
  orch_allocator_config c{};
  c.struct_size = offsetof(orch_allocator_config, backend_api);
  c.level = ORCH_LEVEL_4;
  c.streams = ORCH_ALLOC_STREAMS_DEFAULT;
  c.pager_api = rig.api;
  c.pager = rig.pager;
  // Past its struct_size: garbage from the caller's point of view, never read.
  c.backend_api = reinterpret_cast<const orch_backend_api*>(uintptr_t{0x1});
  c.device = reinterpret_cast<orch_device*>(uintptr_t{0x1});
  orch_allocator* a = nullptr;
  ASSERT_EQ(api->open(&c, &a), ORCH_OK);
  uint64_t address = 0;
  EXPECT_EQ(api->cast_buffer(a, 0, 1 << 20, &address), ORCH_OK);
  // Its own stats struct of exactly ABI 1.0's size.
  orch_cast_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(api->cast_stats(a, &st), ORCH_OK);
  EXPECT_GT(st.committed, 0u);
  api->close(a);
  (*alloc)->shutdown();
}

// The host reads a table's entries only as far as its struct_size reaches.
TEST(struct_prefixes, the_host_reads_a_table_only_as_far_as_its_struct_size_reaches) {
  auto lib = plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
  ASSERT_TRUE(lib);
  orch_plugin_table t = (*lib)->table();
  // Built before the allocator table and extension: still a pager.
  t.struct_size = offsetof(orch_plugin_table, ledger_api);
  t.allocator_api = reinterpret_cast<const orch_allocator_api*>(uintptr_t{0x1});
  EXPECT_TRUE(orch::plugins::validate_table(&t, "older"));
  // One that stops before the pager table has none.
  t.struct_size = offsetof(orch_plugin_table, pager_api);
  const auto none = orch::plugins::validate_table(&t, "older");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.err().code, "invalid_table");
  // A pager table shorter than ABI 1's entries is refused before any of them is read.
  orch_pager_api short_api = *(*lib)->table().pager_api;
  short_api.struct_size = offsetof(orch_pager_api, device);
  t = (*lib)->table();
  t.pager_api = &short_api;
  const auto refused = orch::plugins::validate_table(&t, "short");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.err().code, "invalid_table");
  EXPECT_NE(refused.err().message.find("pager table"), std::string::npos) << refused.err().message;
}

}  // namespace
