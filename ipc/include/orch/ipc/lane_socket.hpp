// lane_socket: one end of a worker's call lane (docs/runtime.md, "The call lane"): a socketpair
// of its own beside the channel, on which the host's calling thread writes a node call and reads
// its answer itself, and the worker's node thread reads its calls and writes its answers itself.
// An uncontended call then crosses two threads, as a raw round trip does, where the channel's
// io threads made it cross five (docs/performance.md, "The call path").
//
// The frames are the channel's (frame.hpp, message.hpp): the header is validated before any body
// byte is used and before the buffer grows for it, bodies are capped and decoded with the same
// checks, and a frame of another generation is refused (the generation fence). Blocking with a
// deadline (poll(2) on a non-blocking socket): each end is used by one thread at a time, which
// its owner guarantees. Any error leaves the lane useless; its owner stops using it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "orch/ipc/message.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

class lane_socket {
 public:
  using clock = std::chrono::steady_clock;

  // Takes `fd` (made non-blocking here); `generation` is stamped on every frame sent and the only
  // one accepted; `name` is used in every error.
  lane_socket(unique_fd fd, std::string name, std::uint32_t generation,
              std::uint32_t max_body = default_max_body);

  // Writes one frame (the header's body_length and generation are set here). Errors:
  // "body_too_large" (nothing written), "deadline_exceeded" (the peer did not take it in time:
  // a frame may be torn), "peer_lost".
  status send(frame_header header, const json& body, clock::time_point deadline);

  // The next frame, waiting until `deadline` (none: for ever). Errors: "peer_lost" (closed or
  // reset, or shut down by this side), "deadline_exceeded", the frame_errc / body_errc of a frame
  // that breaks the protocol, "wrong_generation".
  result<message> receive(std::optional<clock::time_point> deadline);

  // The frame send() would write, encoded into this socket's own buffer (valid until its next
  // encode or send), and written by send_encoded(). For the shared page's box
  // (lane_endpoint.hpp), which takes the same bytes. Errors: "body_too_large".
  result<std::span<const std::uint8_t>> encode(frame_header header, const json& body);
  status send_encoded(clock::time_point deadline);

  // A whole frame received some other way (the shared page's box), checked as receive() checks
  // one. Errors: as receive's, and "bad_box" when `frame` is not exactly one frame.
  result<message> decode(std::span<const std::uint8_t> frame) const;

  // True when bytes are waiting to be read (a frame, or its start), without blocking.
  bool readable() const noexcept;
  // Ends the lane for both sides: a thread blocked on it wakes with "peer_lost". The descriptor
  // stays open (no other thread can be handed its number) until this object is gone.
  void shut_down() noexcept;
  int fd() const noexcept { return fd_.get(); }
  const std::string& name() const noexcept { return name_; }

 private:
  // Waits until the socket is ready for `events` or `deadline`; false at the deadline.
  result<bool> wait(short events, std::optional<clock::time_point> deadline) const;
  result<message> take_frame(std::size_t frame_size, const frame_header& header);
  result<message> finish_frame(const frame_header& header,
                               std::span<const std::uint8_t> body) const;

  unique_fd fd_;
  std::string name_;
  std::uint32_t generation_;
  std::uint32_t max_body_;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(4096);
  std::size_t begin_ = 0;  // [begin_, end_) received, not yet returned
  std::size_t end_ = 0;
  std::vector<std::uint8_t> out_;  // the frame being sent: kept to reuse its capacity
};

}  // namespace orch::ipc
