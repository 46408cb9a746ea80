// futex: sleeping on a 32-bit word in memory that two processes map (a call lane's page,
// lane_memory.hpp), and waking whoever sleeps on it. The shared (not _PRIVATE) operations, so a
// waker in another process reaches the sleeper. Neither can be made to block for ever by the
// other process: FUTEX_WAKE never blocks, and FUTEX_WAIT returns at its timeout.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

namespace orch::ipc {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// Sleeps while `word` holds `seen`, until woken, `deadline` (none: for ever) or a signal; the
// caller looks at what it waits for again in every case.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen,
                       std::optional<std::chrono::steady_clock::time_point> deadline) {
  timespec relative{};
  if (deadline) {
    const auto left = *deadline - std::chrono::steady_clock::now();
    if (left <= left.zero()) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    relative.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    relative.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen,
            deadline ? &relative : nullptr, nullptr, 0);
}

// Moves `word` on and wakes every thread asleep on it.
inline void futex_wake(std::atomic<std::uint32_t>& word) {
  word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr,
            nullptr, 0);
}

}  // namespace orch::ipc
