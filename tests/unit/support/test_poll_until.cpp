// poll_until: the bounded poll a thread runs before it sleeps (support/poll_until.hpp). Nothing
// here depends on how fast the machine is: each bound is either never reached or the only way out.
#include "orch/support/poll_until.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using namespace std::chrono_literals;

TEST(poll_until, returns_true_at_once_when_the_condition_already_holds) {
  int polls = 0;
  EXPECT_TRUE(orch::poll_until([&] { return ++polls > 0; }, 1h));
  EXPECT_EQ(polls, 1);
}

TEST(poll_until, gives_up_after_its_bound_when_the_condition_never_holds) {
  const auto start = std::chrono::steady_clock::now();
  int polls = 0;
  EXPECT_FALSE(orch::poll_until([&] { return ++polls < 0; }, 1ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1ms);
  // The clock is read, and the CPU yielded, once per 64 polls: the polls are cheap pauses.
  EXPECT_GE(polls, 64);
  EXPECT_EQ(polls % 64, 0);
}

TEST(poll_until, on_a_crowded_cpu_yields_at_every_poll_and_still_keeps_its_bound) {
  int polls = 0, asked = 0;
  EXPECT_FALSE(orch::poll_until([&] { return ++polls < 0; }, 1ms, [&] { return ++asked > 0; }));
  // Asked once before the first poll, then at each yield, i.e. after every poll but the last.
  EXPECT_EQ(asked, polls);
  // Not crowded: asked before the first poll and at each yield, once per 64 polls.
  polls = asked = 0;
  EXPECT_FALSE(orch::poll_until([&] { return ++polls < 0; }, 1ms, [&] { return ++asked < 0; }));
  EXPECT_EQ(asked, polls / 64);
  EXPECT_TRUE(orch::poll_until([&] { return true; }, 1h, [] { return true; }));
}

TEST(poll_until, sees_a_flag_another_thread_sets) {
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag.store(true, std::memory_order_release); });
  // An hour's bound: only the flag ends this poll.
  EXPECT_TRUE(orch::poll_until(flag, 1h));
  setter.join();
}

}  // namespace
