// wait_until: how the serve tests wait for what a live server does in its own time (a prompt's
// entry in the history, a worker's replacement, the queue emptied). `ready` is asked again every
// 10 ms until it holds or `limit` passes. The limit is generous (a slow or sanitized build takes
// many times the usual), because it only bounds a hang: a test asserts on what it waited for,
// never on how long that took. Hand-written loops of 500 × 10 ms had each picked its own bound.
#pragma once

#include <chrono>
#include <thread>

namespace orch::serve_testing {

inline constexpr std::chrono::seconds wait_limit{60};

// True once `ready()` holds; false when it still does not after `limit`.
template <typename Ready>
bool wait_until(Ready&& ready, std::chrono::steady_clock::duration limit = wait_limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace orch::serve_testing
