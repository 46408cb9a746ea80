// lane_endpoint: one end of a worker's call lane (docs/protocol.md, "The call lane"): its socket
// (lane_socket.hpp) and its shared page (lane_memory.hpp). A frame that fits goes in the page's
// box and its count moves; a reader that polls the count takes it with no system call at all. A
// larger frame goes on the socket, its count moved first (so its reader is reading while it is
// written, whatever the socket's buffer holds). A side that sleeps sleeps on its
// box's futex word (futex.hpp), and says so in the page first; a sender that finds its reader
// asleep after moving the count wakes it. Each side checks the other's flag after its own write,
// both sequentially consistent, so one of the two always sees the other: no frame waits for a
// reader asleep.
//
// Frames alternate strictly (a call, its answer, the next call), so a box is never rewritten
// before its reader took the frame in it. Either way a frame is the channel's: the same header
// and body checks, cap and generation fence, and one from the box is copied out of the shared
// page before any of it is checked. Each end is used by one thread at a time, which its owner
// guarantees, except shut_down, from any thread; any error leaves the lane useless, and its owner
// stops using it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "orch/ipc/lane_memory.hpp"
#include "orch/ipc/lane_socket.hpp"

namespace orch::ipc {

enum class lane_side { host, worker };

class lane_endpoint {
 public:
  using clock = lane_socket::clock;

  lane_endpoint(lane_socket socket, lane_memory memory, lane_side side);

  // Writes one frame: in the box when it fits, else on the socket. Errors: lane_socket::send's.
  status send(frame_header header, const json& body, clock::time_point deadline);

  // True when a frame the other side sent has not been taken yet. No system call: what a
  // polling reader checks.
  bool waiting() const noexcept;

  // For a thread polling waiting(): notes the CPU it polls on, and says whether the other side
  // last polled on the same one (then it yields to it rather than spinning: poll_until.hpp).
  bool shares_cpu() noexcept;

  // The next frame, sleeping until it comes or `deadline` (none: for ever). Errors:
  // lane_socket::receive's, "bad_box" for a box whose length is not a frame's, "peer_lost" once
  // shut down, "deadline_exceeded".
  result<message> receive(std::optional<clock::time_point> deadline);

  // For a thread that sleeps for other things too (the worker's node thread), on wake_word():
  // load the word, then mark this side asleep, which says whether it may sleep now (nothing is
  // waiting), sleep while the word holds what was loaded, then call woke(). Whoever else wakes
  // that thread bumps the same word (futex_wake).
  bool begin_sleep() noexcept;
  void woke() noexcept;
  std::atomic<std::uint32_t>& wake_word() const noexcept { return incoming().wake; }

  // Ends the lane for both sides: a thread asleep in receive on either end wakes with
  // "peer_lost". Any thread.
  void shut_down() noexcept;

 private:
  lane_box& outgoing() const noexcept;
  lane_box& incoming() const noexcept;
  result<message> take_from_box();
  result<message> take_from_socket(std::optional<clock::time_point> deadline);
  void wake_reader(lane_box& box) noexcept;

  lane_socket socket_;
  lane_memory memory_;
  lane_side side_;
  std::atomic<bool> shut_{false};
  std::uint64_t sent_ = 0;   // frames this side sent
  std::uint64_t taken_ = 0;  // frames this side took
  std::vector<std::uint8_t> copy_;  // a frame copied out of the box: kept to reuse its capacity
};

}  // namespace orch::ipc
