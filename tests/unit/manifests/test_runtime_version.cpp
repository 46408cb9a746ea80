// "MAJOR.MINOR" runtime versions: what parses, what is refused, and the order floors rely on.
#include <gtest/gtest.h>

#include "orch/manifests/runtime_version.hpp"

namespace orch::manifests {
namespace {

TEST(runtime_version, major_and_minor_parse) {
  EXPECT_EQ(parse_runtime_version("12.8"), (runtime_version{12, 8}));
  EXPECT_EQ(parse_runtime_version("12.10"), (runtime_version{12, 10}));
  EXPECT_EQ(parse_runtime_version("7"), (runtime_version{7, 0}));
  EXPECT_EQ(parse_runtime_version("0.0"), (runtime_version{0, 0}));
  EXPECT_EQ(parse_runtime_version("65535.65535"), (runtime_version{65535, 65535}));
}

TEST(runtime_version, anything_else_is_refused) {
  for (const char* text : {"", ".", "12.", ".8", "12.8.1", "v12.8", "12.8 ", " 12.8", "-1.0",
                           "+1.0", "12,8", "65536.0", "1.65536", "999999999999.0", "1e3"}) {
    EXPECT_FALSE(parse_runtime_version(text)) << '"' << text << '"';
  }
}

TEST(runtime_version, minor_versions_compare_as_numbers_not_decimals) {
  EXPECT_LT((runtime_version{12, 8}), (runtime_version{12, 10}));
  EXPECT_LT((runtime_version{12, 10}), (runtime_version{13, 0}));
  EXPECT_EQ((runtime_version{12, 10}).to_string(), "12.10");
}

}  // namespace
}  // namespace orch::manifests
