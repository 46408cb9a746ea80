// The floor of a round trip over shared memory between two processes: a futex doorbell
// (docs/performance.md, "The call path"). Each side writes the other's word, and wakes it only
// when it sleeps; a side that waits polls its word for a moment and then sleeps in FUTEX_WAIT, as
// a call lane over shared memory would. No socket, and no system call while both sides are
// awake: what a lane without a socket could at best reach, the figure that decides whether one
// is worth building. Placed as the polling socket floor is (socket_floors.hpp): the echo on the
// second CPU, the measuring thread on the first while it measures (pin() ... unpin()).
#pragma once

#include <linux/close_range.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <optional>

#include "orch/support/poll_until.hpp"
#include "socket_floors.hpp"

namespace orch::bench_floors {

class doorbell_floor {
 public:
  // `poll`: how long a waiting side polls before it sleeps (the lane's worker polls 100 us).
  explicit doorbell_floor(std::chrono::microseconds poll) : poll_(poll) {
    void* p = ::mmap(nullptr, sizeof(words), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
    if (p == MAP_FAILED) return;
    words_ = new (p) words{};
    const auto cpus = allowed_cpus();
    if (cpus.size() >= 2) {
      pin_ = block_pin(cpus[0]);
      echo_cpu_ = cpus[1];
    }
    child_ = ::fork();
    if (child_ == 0) {
      if (echo_cpu_) pin_to(*echo_cpu_);
      // No descriptor of the parent's: a copy of a socket floor's end would keep its echo from
      // its end of file.
      ::close_range(3, ~0U, 0);
      for (std::uint32_t seen = 0;;) {
        seen = wait_for(words_->call, seen);
        if (seen == stop) ::_exit(0);
        ring(words_->answer, seen);
      }
    }
  }
  doorbell_floor(const doorbell_floor&) = delete;
  doorbell_floor& operator=(const doorbell_floor&) = delete;
  ~doorbell_floor() {
    if (child_ > 0) {
      ring(words_->call, stop);
      ::waitpid(child_, nullptr, 0);
    }
    if (words_ != nullptr) ::munmap(words_, sizeof(words));
  }

  bool usable() const { return child_ > 0; }

  // Pins the calling thread for a block of round trips.
  void pin() { pin_.pin(); }
  void unpin() { pin_.unpin(); }

  // One round trip, in microseconds.
  double round_trip_us() {
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint32_t before = sequence_;
    sequence_ = sequence_ + 1 == stop ? 1 : sequence_ + 1;
    ring(words_->call, sequence_);
    wait_for(words_->answer, before);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
        .count();
  }

 private:
  struct bell {
    alignas(64) std::atomic<std::uint32_t> value{0};
    std::atomic<std::uint32_t> sleeping{0};
  };
  struct words {
    bell call;
    bell answer;
  };
  static constexpr std::uint32_t stop = 0xffffffffu;

  // The value's store and the sleeping flag's load, and the waiter's flag store and value load,
  // are sequentially consistent: one side always sees the other's write, so no wake-up is lost.
  static void ring(bell& b, std::uint32_t value) {
    b.value.store(value);
    if (b.sleeping.load() != 0) ::syscall(SYS_futex, &b.value, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  }
  // Waits until the bell's value moves from `seen`; returns its new value.
  std::uint32_t wait_for(bell& b, std::uint32_t seen) const {
    if (!poll_until([&] { return b.value.load(std::memory_order_acquire) != seen; }, poll_)) {
      b.sleeping.store(1);
      while (b.value.load() == seen) {
        ::syscall(SYS_futex, &b.value, FUTEX_WAIT, seen, nullptr, nullptr, 0);
      }
      b.sleeping.store(0);
    }
    return b.value.load(std::memory_order_acquire);
  }

  std::chrono::microseconds poll_;
  words* words_ = nullptr;
  pid_t child_ = -1;
  std::uint32_t sequence_ = 0;
  std::optional<int> echo_cpu_;
  block_pin pin_;
};

}  // namespace orch::bench_floors
