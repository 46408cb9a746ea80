// byte_budget (orch/serve/byte_budget.hpp): serve's budgets of bytes held at once, capped in all
// and per client address, with each body's and answer's first 64 KiB free.
#include <gtest/gtest.h>

#include "orch/serve/byte_budget.hpp"

namespace {

using orch::serve::byte_budget;
using verdict = byte_budget::verdict;

const auto one = boost::asio::ip::make_address("127.0.0.1");
const auto two = boost::asio::ip::make_address("127.0.0.2");
const auto three = boost::asio::ip::make_address("127.0.0.3");

TEST(byte_budget, one_address_holds_half_of_it_and_the_others_the_rest) {
  byte_budget budget(1000);
  EXPECT_EQ(budget.charge(one, 500), verdict::charged);
  EXPECT_EQ(budget.charge(one, 1), verdict::over_share);
  EXPECT_EQ(budget.charge(two, 400), verdict::charged);
  EXPECT_EQ(budget.charge(three, 101), verdict::over_cap);
  EXPECT_EQ(budget.charge(three, 100), verdict::charged);
  EXPECT_EQ(budget.held(), 1000u);
  budget.release(one, 500);
  EXPECT_EQ(budget.charge(one, 500), verdict::charged);
  budget.release(one, 500);
  budget.release(two, 400);
  budget.release(three, 100);
  EXPECT_EQ(budget.held(), 0u);
}

TEST(byte_budget, the_first_64_kib_of_each_body_or_answer_are_free) {
  EXPECT_EQ(byte_budget::due(0), 0u);
  EXPECT_EQ(byte_budget::due(byte_budget::free_bytes), 0u);
  EXPECT_EQ(byte_budget::due(byte_budget::free_bytes + 10), 10u);
}

}  // namespace
