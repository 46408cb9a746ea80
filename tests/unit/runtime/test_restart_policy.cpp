// What a worker's loss leads to (orch/runtime/restart_policy.hpp): a doubling backoff within the
// crash-loop window, its env failed past the cap with a cool-down that doubles per crash loop,
// never a retry with failed_retry 0 or while shutting down. Time is a hand-driven clock: nothing
// here waits, and every delay is asserted exactly.
#include "orch/runtime/restart_policy.hpp"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace orch::runtime {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using time_point = std::chrono::steady_clock::time_point;

// A clock that moves only when told. It starts an hour past the epoch, so that "long after a
// start that never happened" is a time it can show.
struct hand_clock {
  time_point now{std::chrono::hours(1)};
  time_source source() {
    return [this] { return now; };
  }
};

manifests::worker_settings timing(milliseconds backoff, milliseconds backoff_max, int limit,
                                  milliseconds window, milliseconds failed_retry) {
  manifests::worker_settings t;
  t.restart_backoff = backoff;
  t.restart_backoff_max = backoff_max;
  t.crash_loop_limit = limit;
  t.crash_loop_window = window;
  t.failed_retry = failed_retry;
  return t;
}

TEST(restart_policy, backoff_doubles_per_loss_within_the_window_up_to_its_maximum) {
  hand_clock clock;
  restart_policy policy(timing(100ms, 700ms, 10, 60s, 60s), clock.source());
  policy.started();
  for (const auto expected : {100ms, 200ms, 400ms, 700ms, 700ms}) {
    clock.now += 1s;
    const auto d = policy.lost(false);
    EXPECT_EQ(d.action, restart_action::restart);
    EXPECT_EQ(d.delay, milliseconds(expected));
  }
  EXPECT_EQ(policy.losses_in_window(), 5u);
  EXPECT_EQ(policy.crash_loops(), 0);
}

TEST(restart_policy, losses_older_than_the_window_are_forgotten) {
  hand_clock clock;
  restart_policy policy(timing(100ms, 10s, 10, 10s, 60s), clock.source());
  policy.started();
  EXPECT_EQ(policy.lost(false).delay, 100ms);  // at 0 s
  clock.now += 5s;
  EXPECT_EQ(policy.lost(false).delay, 200ms);  // at 5 s: the one at 0 s counts
  clock.now += 11s;
  const auto d = policy.lost(false);  // at 16 s: both are more than 10 s old
  EXPECT_EQ(d.losses_in_window, 1u);
  EXPECT_EQ(d.delay, 100ms);
}

TEST(restart_policy, a_loss_exactly_one_window_old_still_counts) {
  hand_clock clock;
  restart_policy policy(timing(100ms, 10s, 10, 10s, 60s), clock.source());
  policy.started();
  policy.lost(false);
  clock.now += 10s;
  const auto d = policy.lost(false);
  EXPECT_EQ(d.losses_in_window, 2u);
  EXPECT_EQ(d.delay, 200ms);
}

TEST(restart_policy, past_the_cap_the_env_fails_with_a_cool_down_that_doubles_per_crash_loop) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 2, 60s, 60s), clock.source());
  for (const auto expected : {60s, 120s, 240s}) {
    policy.started();
    clock.now += 1s;
    EXPECT_EQ(policy.lost(false).action, restart_action::restart);
    clock.now += 1s;
    EXPECT_EQ(policy.lost(false).action, restart_action::restart);
    clock.now += 1s;
    const int loops_before = policy.crash_loops();
    const auto d = policy.lost(false);  // the third loss within the window: past the cap of 2
    EXPECT_EQ(d.action, restart_action::fail_then_retry);
    EXPECT_EQ(d.delay, milliseconds(expected));
    EXPECT_EQ(d.retry_at, clock.now + expected);
    EXPECT_EQ(d.losses_in_window, 3u);
    EXPECT_EQ(d.crash_loops, loops_before + 1);
    EXPECT_EQ(policy.crash_loops(), loops_before + 1);
    // The env starts again when its cool-down ends, with no losses counted.
    clock.now = d.retry_at;
    policy.cool_down_ended();
    EXPECT_EQ(policy.losses_in_window(), 0u);
  }
  EXPECT_EQ(policy.crash_loops(), 3);
}

TEST(restart_policy, the_first_loss_after_a_cool_down_backs_off_from_the_start) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 60s, 60s), clock.source());
  policy.started();
  policy.lost(false);
  ASSERT_EQ(policy.lost(false).action, restart_action::fail_then_retry);
  clock.now += 60s;
  policy.cool_down_ended();
  policy.started();
  clock.now += 1s;
  const auto d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::restart);
  EXPECT_EQ(d.delay, 10ms);
  EXPECT_EQ(d.crash_loops, 1);  // it did not run a whole window: still in its crash loop
}

TEST(restart_policy, a_worker_that_ran_a_whole_window_ends_its_crash_loops) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 60s, 60s), clock.source());
  policy.started();
  policy.lost(false);
  ASSERT_EQ(policy.lost(false).crash_loops, 1);
  clock.now += 60s;
  policy.cool_down_ended();
  policy.started();
  clock.now += 60s;  // exactly one window since its start
  const auto d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::restart);
  EXPECT_EQ(d.crash_loops, 0);
  // Its next crash loop is a first one again: the base cool-down, not the doubled one.
  const auto again = policy.lost(false);
  EXPECT_EQ(again.action, restart_action::fail_then_retry);
  EXPECT_EQ(again.delay, 60s);
  EXPECT_EQ(again.crash_loops, 1);
}

TEST(restart_policy, a_worker_lost_just_short_of_a_window_keeps_its_crash_loops) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 60s, 60s), clock.source());
  policy.started();
  policy.lost(false);
  policy.lost(false);
  clock.now += 60s;
  policy.cool_down_ended();
  policy.started();
  clock.now += 60s - 1ms;
  policy.lost(false);
  const auto d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::fail_then_retry);
  EXPECT_EQ(d.delay, 120s);
  EXPECT_EQ(d.crash_loops, 2);
}

TEST(restart_policy, failed_retry_zero_fails_the_env_without_a_retry) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 60s, 0ms), clock.source());
  policy.started();
  policy.lost(false);
  const auto d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::fail);
  EXPECT_EQ(d.delay, 0ms);
  EXPECT_EQ(d.retry_at, time_point{});
  EXPECT_EQ(d.crash_loops, 1);  // counted, as the status documents show
}

TEST(restart_policy, a_loss_while_shutting_down_fails_for_good_without_a_crash_loop) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 60s, 60s), clock.source());
  policy.started();
  const auto first = policy.lost(true);
  EXPECT_EQ(first.action, restart_action::fail_for_shutdown);
  EXPECT_EQ(first.delay, 0ms);
  EXPECT_EQ(first.losses_in_window, 1u);
  const auto past_cap = policy.lost(true);  // past the cap too: still no crash loop
  EXPECT_EQ(past_cap.action, restart_action::fail_for_shutdown);
  EXPECT_EQ(past_cap.delay, 0ms);
  EXPECT_EQ(past_cap.crash_loops, 0);
  EXPECT_EQ(policy.crash_loops(), 0);
}

TEST(restart_policy, a_limit_of_zero_fails_the_env_at_its_first_loss) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 0, 60s, 60s), clock.source());
  policy.started();
  clock.now += 1s;
  const auto d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::fail_then_retry);
  EXPECT_EQ(d.delay, 60s);
  EXPECT_EQ(d.losses_in_window, 1u);
}

TEST(restart_policy, a_window_of_zero_never_lets_losses_add_up) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 1, 0ms, 60s), clock.source());
  policy.started();
  for (int i = 0; i < 5; ++i) {
    clock.now += 1ms;
    const auto d = policy.lost(false);
    EXPECT_EQ(d.action, restart_action::restart);
    EXPECT_EQ(d.delay, 10ms);
    EXPECT_EQ(d.losses_in_window, 1u);
    EXPECT_EQ(d.crash_loops, 0);
  }
}

TEST(restart_policy, a_huge_backoff_maximum_is_reached_without_overflowing) {
  hand_clock clock;
  const auto most = milliseconds::max();
  restart_policy policy(timing(1ms, most, std::numeric_limits<int>::max(), 60s, 60s),
                        clock.source());
  policy.started();
  restart_decision d;
  // 1 ms doubled 62 times is 2^62 ms, more than half the maximum: the 64th loss waits the most.
  for (int i = 0; i < 63; ++i) d = policy.lost(false);
  EXPECT_EQ(d.delay, milliseconds(std::int64_t{1} << 62));
  for (int i = 0; i < 200; ++i) {
    d = policy.lost(false);
    ASSERT_EQ(d.action, restart_action::restart);
    ASSERT_EQ(d.delay, most) << "loss " << i + 64;
  }
  EXPECT_EQ(policy.losses_in_window(), 263u);
}

TEST(restart_policy, many_crash_loops_in_a_row_stay_down_at_most_an_hour) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 0, std::chrono::hours(24), 60s), clock.source());
  policy.started();
  restart_decision d;
  for (int i = 0; i < 1000; ++i) d = policy.lost(false);
  EXPECT_EQ(d.action, restart_action::fail_then_retry);
  EXPECT_EQ(d.delay, max_crash_loop_cool_down);
  EXPECT_EQ(d.crash_loops, 1000);
}

TEST(restart_policy, a_failed_retry_longer_than_an_hour_is_kept_and_never_doubled) {
  hand_clock clock;
  restart_policy policy(timing(10ms, 40ms, 0, std::chrono::hours(24), 2h), clock.source());
  policy.started();
  EXPECT_EQ(policy.lost(false).delay, 2h);
  EXPECT_EQ(policy.lost(false).delay, 2h);
}

TEST(restart_policy, without_a_clock_it_reads_the_steady_clock) {
  restart_policy policy(timing(10ms, 40ms, 5, 60s, 60s));
  const auto before = std::chrono::steady_clock::now();
  const auto started = policy.started();
  EXPECT_GE(started, before);
  EXPECT_LE(started, std::chrono::steady_clock::now());
}

}  // namespace
}  // namespace orch::runtime
