// Protocol levels at the pager boundary (docs/plugin-abi.md): what each level lets a caller
// pass, and the level-restricted sim variants the runtime uses to test injection.
#include <gtest/gtest.h>
#include <unistd.h>

#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

namespace {

using orch::plugins::plugin_library;

class pager_levels : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM);
    ASSERT_TRUE(backend);
    backend_ = std::move(*backend);
    ASSERT_TRUE(backend_->init());
    const auto* sim = static_cast<const orch_sim_api*>(backend_->table().extension);
    orch_sim_config c{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 1ull << 30, 0, 0, 0};
    ASSERT_EQ(sim->create(&c, &fd_), ORCH_OK);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::unique_ptr<plugin_library> pager(const char* path) {
    auto lib = plugin_library::open(path);
    EXPECT_TRUE(lib);
    EXPECT_TRUE((*lib)->init());
    return std::move(*lib);
  }

  orch_pager_config config(uint32_t level) const {
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = level;
    c.sim_fd = fd_;
    c.poll_interval_ms = -1;
    c.poll_floor = -1;
    return c;
  }

  orch_status open(plugin_library& lib, const orch_pager_config& c) {
    orch_pager* p = nullptr;
    const orch_status st = lib.table().pager_api->device_open(&c, &p);
    if (st == ORCH_OK) lib.table().pager_api->device_close(p);
    return st;
  }

  std::unique_ptr<plugin_library> backend_;
  int32_t fd_ = -1;
};

TEST_F(pager_levels, the_l2_variant_speaks_only_l2) {
  auto lib = pager(ORCH_PAGER_SIM_L2_PATH);
  EXPECT_EQ(lib->table().min_level, 2u);
  EXPECT_EQ(lib->table().max_level, 2u);
  EXPECT_EQ(open(*lib, config(2)), ORCH_OK);
  EXPECT_EQ(open(*lib, config(1)), ORCH_UNSUPPORTED);
  EXPECT_EQ(open(*lib, config(3)), ORCH_UNSUPPORTED);
  // L3/L4 entries are NULL: "never", not "not now".
  EXPECT_EQ(lib->table().pager_api->set_simple_headroom, nullptr);
  EXPECT_EQ(lib->table().pager_api->set_pressure_source, nullptr);
  EXPECT_EQ(lib->table().pager_api->set_log_callback, nullptr);
  lib->shutdown();
}

TEST_F(pager_levels, the_l3_l4_variant_refuses_l2_callers) {
  auto lib = pager(ORCH_PAGER_SIM_L3L4_PATH);
  EXPECT_EQ(lib->table().min_level, 3u);
  EXPECT_EQ(lib->table().max_level, 4u);
  EXPECT_EQ(open(*lib, config(2)), ORCH_UNSUPPORTED);
  orch_pager_config c = config(3);
  c.extra_headroom = 256ull << 20;
  EXPECT_EQ(open(*lib, c), ORCH_OK);
  EXPECT_NE(lib->table().pager_api->set_simple_headroom, nullptr);
  lib->shutdown();
}

TEST_F(pager_levels, below_l3_the_extra_headroom_cannot_be_passed) {
  auto lib = pager(ORCH_TEST_PLUGIN_PAGER_SIM);
  orch_pager_config c = config(2);
  c.extra_headroom = 1;
  EXPECT_EQ(open(*lib, c), ORCH_UNSUPPORTED);
  c.level = 3;
  EXPECT_EQ(open(*lib, c), ORCH_OK);
  lib->shutdown();
}

TEST_F(pager_levels, below_l4_the_pressure_source_cannot_be_chosen) {
  auto lib = pager(ORCH_TEST_PLUGIN_PAGER_SIM);
  orch_pager_config c = config(3);
  c.pressure_source = ORCH_PRESSURE_NONE;
  EXPECT_EQ(open(*lib, c), ORCH_UNSUPPORTED);
  c.level = 4;
  EXPECT_EQ(open(*lib, c), ORCH_OK);
  orch_pager* p = nullptr;
  c.level = 3;
  c.pressure_source = ORCH_PRESSURE_DEFAULT;
  ASSERT_EQ(lib->table().pager_api->device_open(&c, &p), ORCH_OK);
  EXPECT_EQ(lib->table().pager_api->set_pressure_source(p, ORCH_PRESSURE_NONE), ORCH_UNSUPPORTED);
  lib->shutdown();
}

// levels.h: below L3 set_simple_headroom must not be called, below L4 set_log_callback. The
// process-wide calls answer for the lowest level any open pager was opened at.
TEST_F(pager_levels, process_wide_calls_are_refused_while_a_lower_level_pager_is_open) {
  auto lib = pager(ORCH_TEST_PLUGIN_PAGER_SIM);
  const orch_pager_api* api = lib->table().pager_api;
  orch_pager* p = nullptr;
  const orch_pager_config l2 = config(ORCH_LEVEL_2);
  ASSERT_EQ(api->device_open(&l2, &p), ORCH_OK);
  uint64_t bytes = 0;
  EXPECT_EQ(api->set_simple_headroom(1), ORCH_UNSUPPORTED);
  EXPECT_EQ(api->get_simple_headroom(&bytes), ORCH_UNSUPPORTED);
  EXPECT_EQ(api->set_log_callback(nullptr, nullptr), ORCH_UNSUPPORTED);
  api->device_close(p);
  const orch_pager_config l3 = config(ORCH_LEVEL_3);
  ASSERT_EQ(api->device_open(&l3, &p), ORCH_OK);
  EXPECT_EQ(api->set_simple_headroom(1), ORCH_OK);
  EXPECT_EQ(api->get_simple_headroom(&bytes), ORCH_OK);
  EXPECT_EQ(bytes, 1u);
  EXPECT_EQ(api->set_log_callback(nullptr, nullptr), ORCH_UNSUPPORTED);
  api->device_close(p);
  EXPECT_EQ(api->set_log_callback(nullptr, nullptr), ORCH_OK);  // nothing open, nothing promised
}

TEST_F(pager_levels, l1_is_a_single_device) {
  auto lib = pager(ORCH_TEST_PLUGIN_PAGER_SIM);
  orch_pager_config c = config(1);
  c.ordinal = 1;
  EXPECT_EQ(open(*lib, c), ORCH_UNSUPPORTED);
  c.ordinal = 0;
  orch_pager* first = nullptr;
  ASSERT_EQ(lib->table().pager_api->device_open(&c, &first), ORCH_OK);
  EXPECT_EQ(open(*lib, c), ORCH_UNSUPPORTED);  // a second device needs L2's explicit handles
  lib->shutdown();
}

TEST_F(pager_levels, l4_log_callback_receives_the_plugins_logs) {
  auto lib = pager(ORCH_TEST_PLUGIN_PAGER_SIM);
  static int calls = 0;
  calls = 0;
  ASSERT_EQ(lib->table().pager_api->set_log_callback(
                [](void*, int32_t, const char*) { ++calls; }, nullptr),
            ORCH_OK);
  EXPECT_EQ(open(*lib, config(5)), ORCH_UNSUPPORTED);  // logs why
  EXPECT_EQ(calls, 1);
  lib->shutdown();
}

}  // namespace
