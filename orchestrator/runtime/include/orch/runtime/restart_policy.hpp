// restart_policy: what a worker's loss leads to (docs/runtime.md, "Supervision"): a restart after
// a doubling backoff, or, past the crash-loop cap, its env failed, started again after a cool-down
// (or never). One per worker; it keeps only the decision's state (the losses within the window,
// the crash loops in a row, the last start) and reads time from the clock it is given, so its
// rules are unit-tested by driving time by hand (tests/unit/runtime/test_restart_policy.cpp).
// The supervisor does the rest: its timers, the spawn, the log lines, failing the queue, and a
// start that cannot succeed on a retry, which never reaches the policy.
//
// Threading: none of its own; the supervisor calls it on its io thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>

#include "orch/manifests/deployment.hpp"

namespace orch::runtime {

// How long an env failed for its crash loop number `loop` (0 for the first) stays down:
// `failed_retry`, doubled per further loop, at most max_crash_loop_cool_down (or failed_retry
// itself, where it is set longer). Unbounded, a client whose prompts crash a pack kept it down
// for days.
inline constexpr std::chrono::milliseconds max_crash_loop_cool_down{3'600'000};
std::chrono::milliseconds crash_loop_cool_down(std::chrono::milliseconds failed_retry, int loop);

// The time a restart_policy reads: std::chrono::steady_clock::now in a host (an empty one means
// that), a hand-driven one in tests.
using time_source = std::function<std::chrono::steady_clock::time_point()>;

enum class restart_action {
  restart,            // start it again after `delay`
  fail_then_retry,    // a crash loop: the env is failed, and started again after `delay`
  fail,               // a crash loop with failed_retry 0: failed until the host restarts
  fail_for_shutdown,  // the host is shutting down: failed, never started again
};

struct restart_decision {
  restart_action action = restart_action::restart;
  // restart: the backoff; fail_then_retry: the cool-down; otherwise 0.
  std::chrono::milliseconds delay{0};
  // fail_then_retry: when the cool-down ends (the time of the loss + delay).
  std::chrono::steady_clock::time_point retry_at;
  std::size_t losses_in_window = 0;  // this loss included
  int crash_loops = 0;               // crash loops in a row, this one included
};

class restart_policy {
 public:
  // Reads restart_backoff, restart_backoff_max, crash_loop_limit, crash_loop_window and
  // failed_retry of `timing` (docs/deployment.md, [workers]).
  explicit restart_policy(const manifests::worker_settings& timing, time_source now = {});

  // A generation was spawned: now. Returns that time (the worker's spawned_at).
  std::chrono::steady_clock::time_point started();
  // The worker was lost now (any loss the supervisor restarts from, shutdown's included): the
  // loss is counted and the decision returned.
  restart_decision lost(bool shutting_down);
  // A crash loop's cool-down ended and the env starts again: it begins with no losses.
  void cool_down_ended() noexcept { losses_.clear(); }

  std::size_t losses_in_window() const noexcept { return losses_.size(); }
  int crash_loops() const noexcept { return crash_loops_; }

 private:
  std::chrono::milliseconds backoff(std::size_t losses) const noexcept;

  std::chrono::milliseconds restart_backoff_;
  std::chrono::milliseconds restart_backoff_max_;
  int crash_loop_limit_;
  std::chrono::milliseconds crash_loop_window_;
  std::chrono::milliseconds failed_retry_;
  time_source now_;
  std::chrono::steady_clock::time_point started_at_{};
  std::deque<std::chrono::steady_clock::time_point> losses_;  // within the window, oldest first
  int crash_loops_ = 0;  // times it was failed for crash-looping since it last ran a window
};

}  // namespace orch::runtime
