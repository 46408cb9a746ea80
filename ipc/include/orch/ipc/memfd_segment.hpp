// memfd_segment: an anonymous, size-sealed shared-memory file, and mapping, one mmap of part of
// it. docs/shared-memory.md and docs/references.md, anchors §8.2: segments are memfds created by
// the host only, so nothing ever appears in /dev/shm and nothing can leak there after a crash;
// the fd crosses to workers with SCM_RIGHTS (fd_passing.hpp). The size is sealed
// (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so no process can truncate a segment under
// another's mapping (which would turn reads into SIGBUS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

// One mmap'ed range. Unmapped on destruction; move-only.
class mapping {
 public:
  mapping() noexcept = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  mapping(mapping&& other) noexcept;
  mapping& operator=(mapping&& other) noexcept;
  ~mapping();

  // Maps [offset, offset + length) of fd; offset must be page aligned. Errors: "map_failed".
  static result<mapping> map(int fd, std::uint64_t offset, std::uint64_t length, bool writable);

  std::byte* data() const noexcept { return static_cast<std::byte*>(addr_); }
  std::uint64_t size() const noexcept { return length_; }
  std::span<std::byte> bytes() const noexcept {
    return {data(), static_cast<std::size_t>(length_)};
  }
  bool writable() const noexcept { return writable_; }
  void reset() noexcept;

 private:
  void* addr_ = nullptr;
  std::uint64_t length_ = 0;
  bool writable_ = false;
};

class memfd_segment {
 public:
  // Host only: creates a memfd of exactly `size` bytes (close-on-exec) and seals its size.
  // `name` shows in /proc/<pid>/fd and helps attribute a segment; it is never a path.
  // With `final_seal` false, F_SEAL_SEAL waits for seal_future_writes(), so the host can map the
  // segment writable first and then forbid every later writer.
  // Errors: "memfd_failed", "seal_failed".
  static result<memfd_segment> create(const std::string& name, std::uint64_t size,
                                      bool final_seal = true);

  // Host only, once it holds its writable mappings (create with final_seal false): adds
  // F_SEAL_FUTURE_WRITE, so no later mmap(PROT_WRITE, MAP_SHARED), mprotect to writable or
  // write(2) succeeds through any fd of this file, a re-open of /proc/<pid>/fd/N included; the
  // mappings that exist keep working. Then F_SEAL_SEAL, whatever happened. Errors:
  // "seal_refused" (a kernel without F_SEAL_FUTURE_WRITE, before 5.1; the size seals are final
  // anyway), "seal_failed".
  status seal_future_writes();
  // True when F_SEAL_FUTURE_WRITE is on this fd (host or receiver).
  bool future_writes_sealed() const noexcept;

  // Any process: adopts a received fd, checking that it is a memfd with the size seals and that
  // its size equals `expected_size` (0 means: take whatever size it has).
  // Errors: "not_sealed", "size_mismatch", "stat_failed". On error the fd is closed.
  static result<memfd_segment> adopt(unique_fd fd, std::uint64_t expected_size);

  int fd() const noexcept { return fd_.get(); }
  std::uint64_t size() const noexcept { return size_; }
  // Gives up the fd (mappings made from it stay valid): the segment is empty afterwards.
  unique_fd release() noexcept {
    size_ = 0;
    return std::move(fd_);
  }

 private:
  memfd_segment(unique_fd fd, std::uint64_t size) : fd_(std::move(fd)), size_(size) {}
  unique_fd fd_;
  std::uint64_t size_ = 0;
};

// The page size, cached; mapping offsets are multiples of it.
std::uint64_t page_size() noexcept;

// Rounds `value` up to a multiple of `align` (a power of two). No overflow check: callers bound
// their inputs first.
constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t align) noexcept {
  return (value + align - 1) & ~(align - 1);
}

}  // namespace orch::ipc
