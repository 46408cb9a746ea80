// unique_fd: sole owner of one file descriptor. Segment fds and socket ends move between
// objects and across processes (SCM_RIGHTS); a leaked fd keeps a memfd's pages alive after every
// mapping is gone, so ownership must be explicit (tests compare /proc/self/fd before and after).
#pragma once

#include <unistd.h>

#include <utility>

namespace orch::ipc {

class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives up ownership; the caller closes the returned fd.
  int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the owned fd (close(2) is not retried on EINTR: on Linux the fd is gone either way).
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace orch::ipc
