// The floor of a round trip over a Unix stream socket between two processes, measured three ways
// inside a benchmark's own interleaved blocks (docs/performance.md, "Floors").
//
// One way alone is no floor. On a VM, a blocking read's wake-up costs about 3 us when the
// scheduler keeps both processes on one CPU and about 60 us when the reader's CPU has gone idle
// on the other one; which of the two a run gets decides the figure. So a benchmark measures:
//   blocking   both sides block in read(), placed by the scheduler: what a simple RPC pays;
//   one_cpu    the same with both processes on one CPU: the wake-up is a direct switch;
//   polling    both sides poll with MSG_DONTWAIT on two CPUs: the socket alone, no wake-up
//              (each polls for 100 us, as the call lane's worker does, then sleeps: an echo that
//              polled for ever would take a CPU from every other kind measured beside it);
// and takes the lowest as the floor, which nothing running on that socket can beat.
#pragma once

#include <poll.h>
#include <sched.h>
#include <linux/close_range.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace orch::bench_floors {

enum class floor_kind { blocking, one_cpu, polling };

inline const char* floor_name(floor_kind k) {
  switch (k) {
    case floor_kind::blocking:
      return "raw socket, blocking reads";
    case floor_kind::one_cpu:
      return "raw socket, blocking, one CPU";
    case floor_kind::polling:
      return "raw socket, both polling";
  }
  return "";
}

// The CPUs this process may run on, lowest first.
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

inline void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::sched_setaffinity(0, sizeof set, &set);
}

// The measuring thread's pin for a floor's block (pin() ... unpin()), to `cpu` when there is one.
class block_pin {
 public:
  explicit block_pin(std::optional<int> cpu = std::nullopt) : cpu_(cpu) {}
  void pin() {
    if (!cpu_) return;
    saved_ = cpu_set_t{};
    ::sched_getaffinity(0, sizeof *saved_, &*saved_);
    pin_to(*cpu_);
  }
  void unpin() {
    if (saved_) ::sched_setaffinity(0, sizeof *saved_, &*saved_);
    saved_.reset();
  }

 private:
  std::optional<int> cpu_;
  std::optional<cpu_set_t> saved_;
};

// One way of the floor: an echo process on the other end of a socketpair, and round trips of
// `bytes` to it from the calling thread. For one_cpu and polling the calling thread is pinned
// while it measures (pin() ... unpin()), and the echo process for good.
class socket_floor {
 public:
  socket_floor(floor_kind kind, std::size_t bytes) : kind_(kind), buffer_(bytes, 'x') {
    const auto cpus = allowed_cpus();
    if (kind == floor_kind::polling && cpus.size() < 2) return;  // nothing to poll against
    if (kind != floor_kind::blocking && !cpus.empty()) {
      pin_ = block_pin(cpus.front());
      echo_cpu_ = kind == floor_kind::one_cpu ? cpus.front() : cpus[1];
    }
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
    child_ = ::fork();
    if (child_ == 0) {
      // Only its own end: a copy of another floor's end would keep that echo from its EOF.
      ::close_range(3, static_cast<unsigned>(fds[1]) - 1, 0);
      ::close_range(static_cast<unsigned>(fds[1]) + 1, ~0U, 0);
      if (echo_cpu_) pin_to(*echo_cpu_);
      while (transfer(fds[1], false) && transfer(fds[1], true)) {
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  socket_floor(const socket_floor&) = delete;
  socket_floor& operator=(const socket_floor&) = delete;
  ~socket_floor() {
    if (fd_ >= 0) ::close(fd_);
    if (child_ > 0) ::waitpid(child_, nullptr, 0);
  }

  bool usable() const { return fd_ >= 0; }
  floor_kind kind() const { return kind_; }

  // Pins the calling thread for a block of round trips (where this way needs it).
  void pin() { pin_.pin(); }
  void unpin() { pin_.unpin(); }

  // One round trip, in microseconds.
  double round_trip_us() {
    const auto t0 = std::chrono::steady_clock::now();
    transfer(fd_, true);
    transfer(fd_, false);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
        .count();
  }

 private:
  // Sends (`out`) or receives the buffer whole; polls without blocking for `polling`, for at most
  // `poll_limit` before it sleeps in poll(2).
  bool transfer(int fd, bool out) {
    const int flags = kind_ == floor_kind::polling ? MSG_DONTWAIT : 0;
    constexpr auto poll_limit = std::chrono::microseconds(100);
    auto sleep_after = std::chrono::steady_clock::now() + poll_limit;
    std::size_t done = 0;
    for (unsigned polls = 1; done < buffer_.size(); ++polls) {
      if (flags != 0 && polls % 64 == 0 && std::chrono::steady_clock::now() >= sleep_after) {
        pollfd p{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
        ::poll(&p, 1, -1);
        sleep_after = std::chrono::steady_clock::now() + poll_limit;
      }
      const ssize_t n = out ? ::send(fd, buffer_.data() + done, buffer_.size() - done,
                                     flags | MSG_NOSIGNAL)
                            : ::recv(fd, buffer_.data() + done, buffer_.size() - done, flags);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return false;
      }
    }
    return true;
  }

  floor_kind kind_;
  std::vector<char> buffer_;
  int fd_ = -1;
  pid_t child_ = -1;
  std::optional<int> echo_cpu_;
  block_pin pin_;
};

}  // namespace orch::bench_floors
