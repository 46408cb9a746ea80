#include "orch/support/result.hpp"

#include <gtest/gtest.h>

namespace {

orch::result<int> parse_positive(int v) {
  if (v <= 0) return orch::error{"not_positive", "value must be > 0"};
  return v;
}

TEST(result, holds_value_when_ok) {
  auto r = parse_positive(3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
}

TEST(result, holds_code_and_message_on_error) {
  auto r = parse_positive(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, "not_positive");
  EXPECT_EQ(r.err().message, "value must be > 0");
}

TEST(result, status_without_value) {
  orch::status s = orch::ok_status();
  EXPECT_TRUE(s.ok());
  orch::status f = orch::error{"x", "y"};
  EXPECT_FALSE(f.ok());
}

}  // namespace
