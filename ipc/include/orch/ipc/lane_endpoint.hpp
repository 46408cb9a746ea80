// lane_endpoint: one end of a worker's call lane (docs/protocol.md, "The call lane"): its socket
// (lane_socket.hpp), its shared page (lane_memory.hpp) and two wake eventfds. A frame that fits
// goes in the page's box and its count moves; a reader that polls the count takes it with no
// system call at all. A larger frame goes on the socket. A side that sleeps sleeps on the socket
// and its wake eventfd, and says so in the page first; a sender that finds its reader asleep
// after writing the box writes that eventfd. Each side checks the other's flag after its own
// write, both sequentially consistent, so one of the two always sees the other: no frame waits
// for a reader asleep.
//
// Why an eventfd and not a byte on the socket: a socket's write wakes its reader as a
// synchronous wake-up, which tells the scheduler the writer is about to sleep and pulls the
// reader onto the writer's CPU. A lane's writer does not sleep, it polls, so the two would then
// share one CPU and take turns (docs/performance.md, "The call lane"). An eventfd's wake-up lets
// the scheduler put the reader on an idle CPU.
//
// Frames alternate strictly (a call, its answer, the next call), so a box is never rewritten
// before its reader took the frame in it. Either way a frame is the channel's: the same header
// and body checks, cap and generation fence, and one from the box is copied out of the shared
// page before any of it is checked. Each end is used by one thread at a time, which its owner
// guarantees; any error leaves the lane useless, and its owner stops using it.
#pragma once

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

  // `wake_in` is the eventfd the other side writes to wake this one, `wake_out` the other side's.
  lane_endpoint(lane_socket socket, lane_memory memory, unique_fd wake_in, unique_fd wake_out,
                lane_side side);

  // Writes one frame: in the box when it fits, else on the socket. Errors: lane_socket::send's.
  status send(frame_header header, const json& body, clock::time_point deadline);

  // True when a frame the other side sent has not been taken yet. No system call: what a
  // polling reader checks.
  bool waiting() const noexcept;

  // For a thread polling waiting(): notes the CPU it polls on, and says whether the other side
  // last polled on the same one (then it yields to it rather than spinning: poll_until.hpp).
  bool shares_cpu() noexcept;

  // The next frame, sleeping on the socket until it comes or `deadline` (none: for ever).
  // Errors: lane_socket::receive's, and "bad_box" for a box whose length is not a frame's.
  result<message> receive(std::optional<clock::time_point> deadline);

  // For a thread that sleeps on other descriptors too (the worker's node thread): marks this
  // side asleep and says whether it may sleep now, i.e. nothing is waiting; poll fd() and
  // wake_fd() for reading (the caller empties wake_fd() itself), then call woke().
  bool begin_sleep() noexcept;
  // Marks this side awake; with `readable` (fd() was), reads what the socket holds without
  // blocking: a frame is kept for receive. Errors: lane_socket::receive's.
  status woke(bool readable);

  int fd() const noexcept { return socket_.fd(); }
  int wake_fd() const noexcept { return wake_in_.get(); }
  // Ends the lane for both sides (lane_socket::shut_down).
  void shut_down() noexcept { socket_.shut_down(); }

 private:
  lane_box& outgoing() const noexcept;
  lane_box& incoming() const noexcept;
  result<message> take_from_box();
  // Sleeps until the socket or the wake eventfd is readable, or `deadline`; false at it.
  result<bool> sleep(std::optional<clock::time_point> deadline);

  lane_socket socket_;
  lane_memory memory_;
  unique_fd wake_in_, wake_out_;
  lane_side side_;
  std::uint64_t sent_ = 0;   // frames this side sent
  std::uint64_t taken_ = 0;  // frames this side took
  std::optional<message> early_;  // a frame read from the socket before its count moved
  std::vector<std::uint8_t> copy_;  // a frame copied out of the box: kept to reuse its capacity
};

}  // namespace orch::ipc
