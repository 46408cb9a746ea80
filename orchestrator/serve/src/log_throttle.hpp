// log_throttle: whether a warning a client can cause may be logged now, at most once a period,
// so that a client that repeats the request cannot flood the log (/upload/mask's "wrote
// nothing", a fleet host's refusals: serve_files.cpp, fleet_auth.cpp). Lock-free, from any
// thread; one throttle per kind of warning.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace orch::serve {

class log_throttle {
 public:
  explicit log_throttle(std::chrono::seconds period = std::chrono::minutes(1))
      : period_(period.count()) {}

  // True at most once a period: the caller logs then, and stays quiet otherwise.
  bool due() {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    std::int64_t said = last_said_.load();
    return now - said >= period_ && last_said_.compare_exchange_strong(said, now);
  }

 private:
  std::int64_t period_;
  std::atomic<std::int64_t> last_said_{std::numeric_limits<std::int64_t>::min() / 2};
};

}  // namespace orch::serve
