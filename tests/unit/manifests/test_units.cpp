#include <gtest/gtest.h>

#include "orch/manifests/units.hpp"

namespace orch::manifests {
namespace {

TEST(units, sizes_in_binary_and_decimal_units) {
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("8GiB"), 8ull << 30);
  EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("2 MiB"), 2ull << 20);
  EXPECT_EQ(parse_size("1GB"), 1'000'000'000ull);
  EXPECT_EQ(parse_size("17B"), 17ull);
}

// docs/deployment.md's annotated example writes reserve_vram = "0": zero needs no unit.
TEST(units, zero_needs_no_unit_and_other_numbers_still_do) {
  EXPECT_EQ(parse_size("0"), 0ull);
  EXPECT_EQ(parse_size("0.0"), 0ull);
  EXPECT_FALSE(parse_size("1"));
  EXPECT_FALSE(parse_size("0.5"));
}

TEST(units, sizes_reject_junk) {
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("GiB"));
  EXPECT_FALSE(parse_size("12"));
  EXPECT_FALSE(parse_size("-1GiB"));
  EXPECT_FALSE(parse_size("1gib"));
  EXPECT_FALSE(parse_size("99999999999TiB"));
}

TEST(units, durations) {
  EXPECT_EQ(parse_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_duration("10s"), std::chrono::milliseconds(10'000));
  EXPECT_EQ(parse_duration("1.5s"), std::chrono::milliseconds(1'500));
  EXPECT_EQ(parse_duration("2m"), std::chrono::milliseconds(120'000));
  EXPECT_EQ(parse_duration("1h"), std::chrono::milliseconds(3'600'000));
  EXPECT_FALSE(parse_duration("10"));
  EXPECT_FALSE(parse_duration("10 parsecs"));
}

TEST(units, format_size_picks_the_largest_unit) {
  EXPECT_EQ(format_size(17), "17 B");
  EXPECT_EQ(format_size(512ull << 20), "512 MiB");
  EXPECT_EQ(format_size(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace orch::manifests
