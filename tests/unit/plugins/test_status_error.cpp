// The one pair of conversions between a plugin's orch_status and the host's error
// (orch/plugins/status_error.hpp, docs/errors.md).
#include <gtest/gtest.h>

#include "orch/plugins/errc.hpp"
#include "orch/plugins/status_error.hpp"

namespace orch::plugins {
namespace {

TEST(status_error, every_status_survives_the_round_trip_to_an_error_and_back) {
  for (orch_status st = ORCH_OOM_RETRYABLE; st <= ORCH_HOST_OOM; ++st) {
    const error e = status_error(st, "region_create");
    EXPECT_EQ(error_status(e), st) << e.code;
    EXPECT_NE(e.message.find("region_create answered "), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(orch_status_name(st)), std::string::npos) << e.message;
  }
}

TEST(status_error, out_of_memory_is_only_the_retryable_status) {
  EXPECT_EQ(status_error(ORCH_OOM_RETRYABLE, "x").code, plugin_errc::out_of_memory);
  for (orch_status st : {ORCH_BUSY, ORCH_NO_SLOT, ORCH_HOST_OOM}) {
    EXPECT_NE(status_error(st, "x").code, plugin_errc::out_of_memory) << orch_status_name(st);
    EXPECT_NE(error_status(status_error(st, "x")), ORCH_OOM_RETRYABLE);
  }
}

TEST(status_error, a_status_the_host_does_not_know_is_named_and_is_an_error) {
  const error e = status_error(42, "fault");
  EXPECT_EQ(e.code, plugin_errc::unknown_status);
  EXPECT_NE(e.message.find("42"), std::string::npos) << e.message;
  EXPECT_EQ(error_status(e), ORCH_DEVICE_ERROR);
}

TEST(status_error, a_host_error_that_is_no_status_goes_back_as_a_device_error) {
  EXPECT_EQ(error_status(error{plugin_errc::load_failed, "no file"}), ORCH_DEVICE_ERROR);
}

}  // namespace
}  // namespace orch::plugins
