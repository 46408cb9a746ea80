// What the status document reads from a worker's own reports (docs/cli.md, `comfy-orch status`).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "orch/live/process_status.hpp"

namespace orch::live {
namespace {

// The settings text a worker reports (its own bytes) read as fields, so that a mismatch names
// the fields that differ.
TEST(settings_fields, reads_each_field_of_the_applied_settings_text) {
  EXPECT_EQ(settings_fields("streams=2;pinned=1;level=4"),
            (nlohmann::json{{"streams", "2"}, {"pinned", "1"}, {"level", "4"}}));
  EXPECT_EQ(settings_fields(""), nlohmann::json::object());
  // Not of that shape: the fields that are, nothing invented.
  EXPECT_EQ(settings_fields("=1;junk;;streams=;a=b=c"),
            (nlohmann::json{{"streams", ""}, {"a", "b=c"}}));
  // A worker's bytes: valid text, whatever was sent.
  const auto odd = settings_fields(std::string("k\xff=v\x01"));
  EXPECT_NO_THROW((void)odd.dump());
}

}  // namespace
}  // namespace orch::live
