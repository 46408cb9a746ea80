#include "orch/runtime/restart_policy.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace orch::runtime {

std::chrono::milliseconds crash_loop_cool_down(std::chrono::milliseconds failed_retry, int loop) {
  const auto cap = std::max(failed_retry, max_crash_loop_cool_down);
  auto cool_down = failed_retry;
  // Doubling stops at the cap (an hour, or failed_retry), so it never overflows, however many
  // loops; a cool-down of 0 or less would never reach it and is not doubled.
  for (int i = 0; i < loop && cool_down.count() > 0 && cool_down < cap; ++i) cool_down *= 2;
  return std::min(cool_down, cap);
}

restart_policy::restart_policy(const manifests::worker_settings& timing, time_source now)
    : restart_backoff_(timing.restart_backoff),
      restart_backoff_max_(timing.restart_backoff_max),
      crash_loop_limit_(timing.crash_loop_limit),
      crash_loop_window_(timing.crash_loop_window),
      failed_retry_(timing.failed_retry),
      now_(now ? std::move(now) : time_source(&std::chrono::steady_clock::now)) {}

std::chrono::steady_clock::time_point restart_policy::started() {
  started_at_ = now_();
  return started_at_;
}

std::chrono::milliseconds restart_policy::backoff(std::size_t losses) const noexcept {
  // restart_backoff, doubled per further loss within the window, at most restart_backoff_max.
  // Doubling only below half the maximum keeps a huge maximum from overflowing.
  auto delay = restart_backoff_;
  for (std::size_t i = 1; i < losses && delay.count() > 0 && delay < restart_backoff_max_; ++i) {
    delay = delay > restart_backoff_max_ / 2 ? restart_backoff_max_ : delay * 2;
  }
  return std::min(delay, restart_backoff_max_);
}

restart_decision restart_policy::lost(bool shutting_down) {
  const auto now = now_();
  // A worker that ran a whole crash-loop window since its start ended the crash loops.
  if (now - started_at_ >= crash_loop_window_) crash_loops_ = 0;
  losses_.push_back(now);
  while (!losses_.empty() && now - losses_.front() > crash_loop_window_) losses_.pop_front();
  restart_decision d;
  d.losses_in_window = losses_.size();
  d.crash_loops = crash_loops_;
  if (shutting_down) {
    d.action = restart_action::fail_for_shutdown;
    return d;
  }
  if (crash_loop_limit_ < 0 || losses_.size() > static_cast<std::size_t>(crash_loop_limit_)) {
    // Not for good: a client whose prompts crash a pack cannot keep it offline. It is started
    // again after a cool-down that doubles with each crash loop in a row.
    const auto cool_down = crash_loop_cool_down(failed_retry_, crash_loops_);
    if (crash_loops_ < std::numeric_limits<int>::max()) crash_loops_ += 1;
    d.crash_loops = crash_loops_;
    if (failed_retry_.count() <= 0) {  // 0: failed until the host restarts
      d.action = restart_action::fail;
      return d;
    }
    d.action = restart_action::fail_then_retry;
    d.delay = cool_down;
    d.retry_at = now + cool_down;
    return d;
  }
  d.action = restart_action::restart;
  d.delay = backoff(losses_.size());
  return d;
}

}  // namespace orch::runtime
