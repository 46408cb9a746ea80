// A bounded poll before a thread sleeps on something that is usually about to happen (the next
// call, on a worker's node thread): when it happens within the bound, the thread is still awake
// and nobody pays its wake-up (docs/performance.md, "The call path").
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace orch {

// The CPU's hint that this thread is polling (x86 `pause`): the core's other hyperthread, and
// the power the poll would spend, get the cycles back.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Polls `ready()` for at most `limit`; true when it became true. It yields the CPU every 64 polls,
// not at every poll: a yield is a system call (yielding at every poll made about 260 of them per
// empty call, bench_peers' counts), and yielding a few us apart still hands the CPU to a thread
// woken on it (the thread that makes `ready()` true), which pauses alone left waiting for a
// preemption (up to 190 us at the 99th percentile).
template <typename Ready>
bool poll_until(Ready ready, std::chrono::steady_clock::duration limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (unsigned polls = 1; !ready(); ++polls) {
    if (polls % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    }
    cpu_relax();
  }
  return true;
}

// poll_until, yielding at every poll while `crowded()` says the thread that makes `ready()` true
// shares this thread's CPU: polling there only delays it until the next yield (64 polls, a few
// us each way of a call on one CPU), where a yield hands it the CPU at once. Asked again at each
// yield, so a thread moved away goes back to polling alone.
template <typename Ready, typename Crowded>
bool poll_until(Ready ready, std::chrono::steady_clock::duration limit, Crowded crowded) {
  const auto until = std::chrono::steady_clock::now() + limit;
  bool yield_each_poll = crowded();
  for (unsigned polls = 1; !ready(); ++polls) {
    if (yield_each_poll || polls % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
      yield_each_poll = crowded();
    }
    cpu_relax();
  }
  return true;
}

// poll_until for a flag set with release order.
inline bool poll_until(const std::atomic<bool>& flag, std::chrono::steady_clock::duration limit) {
  return poll_until([&] { return flag.load(std::memory_order_acquire); }, limit);
}

}  // namespace orch
