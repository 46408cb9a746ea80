#include "orch/support/logging.hpp"

#include <cstdlib>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

namespace {

TEST(logging, orch_log_level_sets_the_level) {
  ::setenv("ORCH_LOG_LEVEL", "debug", 1);
  orch::init_logging("test");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  ::setenv("ORCH_LOG_LEVEL", "off", 1);
  orch::init_logging("test");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::off);
  ::unsetenv("ORCH_LOG_LEVEL");
}

TEST(logging, unknown_level_keeps_info) {
  ::setenv("ORCH_LOG_LEVEL", "loud", 1);
  orch::init_logging("test");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
  ::unsetenv("ORCH_LOG_LEVEL");
}

TEST(logging, default_is_info) {
  ::unsetenv("ORCH_LOG_LEVEL");
  orch::init_logging("test");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
}

}  // namespace
