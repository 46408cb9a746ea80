// lane_memory: the shared page of a worker's call lane (docs/protocol.md, "The call lane"), a
// memfd the host makes for each generation and sends beside the lane's socket. One box each way
// holds the latest frame its side wrote and counts the frames it sent, so a reader that polls
// takes a frame without a system call; over the socket alone a call took four
// (docs/performance.md, "The call lane").
//
// Writers: a box is written by its sender, except `reader_asleep` and `reader_cpu`, by its
// reader, and `wake`, which anyone who wakes the reader bumps. Both processes map the page
// writable, so the worker can scribble the host's box too; only the worker reads it. The host
// never reads back a word it wrote itself, and takes everything in the worker's box as a claim: a
// frame is copied out before any byte of it is checked (lane_endpoint.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "orch/ipc/memfd_segment.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t lane_page_magic = 0x454e414cu;  // "LANE"
inline constexpr std::uint16_t lane_page_version = 2;  // 2: the futex word `wake`
// The largest frame a box holds: a node call's inputs and its answer fit with room to spare; a
// larger frame goes on the socket.
inline constexpr std::size_t lane_box_capacity = 64 * 1024 - 128;

// One direction of the lane.
struct lane_box {
  alignas(64) std::atomic<std::uint64_t> sent;  // frames sent so far, in the box or on the socket
  std::atomic<std::uint64_t> boxed;             // which of them `bytes` holds (0: none yet)
  std::atomic<std::uint64_t> length;            // its length in bytes
  // Set by the reader while it sleeps: the sender then bumps `wake` and wakes it.
  alignas(64) std::atomic<std::uint32_t> reader_asleep;
  // The futex word the reader sleeps on (FUTEX_WAIT, shared: the page is in two processes). A
  // futex, not a descriptor: FUTEX_WAKE never blocks and FUTEX_WAIT has a timeout, whatever the
  // other process does to the page, where an eventfd shares its O_NONBLOCK flag with the worker,
  // which could make the host's write or read block for ever. And its wake-up, unlike a
  // socket's, is not synchronous: it does not pull the reader onto the waker's CPU.
  std::atomic<std::uint32_t> wake;
  // The CPU the reader last polled on (+1; 0: not known): a sender polling on the same CPU for
  // the reader's answer yields to it rather than spinning (lane_endpoint::shares_cpu).
  std::atomic<std::uint32_t> reader_cpu;
  alignas(64) std::byte bytes[lane_box_capacity];
};
static_assert(std::is_standard_layout_v<lane_box> && sizeof(lane_box) == 64 * 1024);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

struct lane_page {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint32_t size;  // sizeof(lane_page)
  alignas(64) lane_box calls;  // host -> worker
  lane_box answers;            // worker -> host
};
static_assert(std::is_standard_layout_v<lane_page>);

class lane_memory {
 public:
  // Host: a new page, header stamped, every count 0. Errors: memfd / mapping errors.
  static result<lane_memory> create();
  // Worker: maps a page it was sent, checking its size and header. Errors: "not_sealed",
  // "size_mismatch", "map_failed", "bad_segment".
  static result<lane_memory> attach(unique_fd fd);

  lane_page& page() const noexcept { return *reinterpret_cast<lane_page*>(map_.data()); }
  // The memfd, to send to the worker; -1 once released.
  int fd() const noexcept { return file_.fd(); }
  // Closes this side's fd (the mapping stays): the host's, once sent.
  void close_fd() noexcept { (void)file_.release(); }

 private:
  lane_memory(memfd_segment file, mapping map) : file_(std::move(file)), map_(std::move(map)) {}
  memfd_segment file_;
  mapping map_;
};

}  // namespace orch::ipc
