// channel: the framed, request/response connection between the host and one worker over a local
// stream socket (a socketpair end inherited at spawn; docs/protocol.md), on Boost.Asio.
// Mechanisms from docs/references.md, anchors §8.4 (Ray's client_connection, Triton's
// "respond error to all requests"):
//   - every frame header is validated before any of its body is used, and before the read
//     buffer grows for that body; any violation closes the connection with a logged reason
//     (frame.hpp); bodies over the cap are never sent either;
//   - requests carry ids, responses echo them; every request has a deadline;
//   - when the peer goes away, every pending request fails at once with "peer_lost";
//   - a frame is written on the calling thread when nothing is queued (a worker's answer leaves
//     from its node thread without waking the io thread); otherwise it waits in a bounded
//     queue with exactly one async_write in flight;
//   - frames stamped with another worker generation are dropped (the generation fence).
//
// Threading: the read side and the deadline timer live on one strand; the send side (the queue,
// the pending requests, closed) is under one mutex. Public calls may come from any thread, and
// frames leave in the order the calls were made. Every handler passed in runs on the strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/frame.hpp"
#include "orch/ipc/message.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

struct channel_options {
  std::string name = "channel";               // used in every log line
  std::uint32_t max_body = default_max_body;  // hard cap on incoming bodies
  std::size_t max_queue = 1024;               // outgoing frames queued behind the one in flight
  std::uint32_t generation = 0;               // stamped on every frame sent
  std::optional<std::uint32_t> accept_generation;  // when set, other generations are dropped
  // Called on the strand once each frame received has been handled (its handler returned), with
  // the count so far: a call lane's answer waits until the frames sent ahead of it on this
  // channel were handled (docs/runtime.md, "The call lane").
  std::function<void(std::uint64_t frames)> on_frame_handled;
};

class channel : public std::enable_shared_from_this<channel> {
 public:
  using socket_type = boost::asio::local::stream_protocol::socket;
  using message_handler = std::function<void(message)>;  // requests and notifications
  using response_handler = std::function<void(result<message>)>;
  using close_handler = std::function<void(const error&)>;

  static std::shared_ptr<channel> create(socket_type socket, channel_options options);

  // Starts reading. `on_close` gets the reason once: code "peer_lost" when the peer went away,
  // a frame_errc/body_errc code for a protocol violation, or "closed" for a local close().
  void start(message_handler on_message, close_handler on_close = {});

  // Sends a request; `on_response` runs exactly once: with the response, with the peer's error
  // (its code and message) when the response carries frame_flags::error, or with
  // "deadline_exceeded", "queue_full", "body_too_large" (over max_body) or "peer_lost".
  void request(message_type type, json body, std::chrono::milliseconds deadline,
               response_handler on_response);
  // One-way message. A full queue means the peer stopped reading: the connection is closed.
  void notify(message_type type, json body);
  // A one-way message that may be lost (progress): sent only while fewer than `room` frames wait
  // to be written; false, and nothing else happens, when it was not.
  bool notify_if_room(message_type type, const json& body, std::size_t room);
  void respond(const frame_header& to, json body);
  void respond_error(const frame_header& to, const error& e);

  // Closes the connection; pending requests fail with "peer_lost". Idempotent.
  void close(std::string reason);

  const channel_options& options() const noexcept { return options_; }
  // Frames this side has sent (accepted for sending, in order) so far.
  std::uint64_t frames_sent() const noexcept { return frames_sent_.load(std::memory_order_acquire); }

 private:
  channel(socket_type socket, channel_options options);

  using clock = std::chrono::steady_clock;
  struct pending_request {
    response_handler handler;
    clock::time_point deadline;
  };

  void read_more(std::size_t need);
  void process_input();
  void dispatch(const frame_header& header, std::span<const std::uint8_t> body);
  // The frame's bytes, stamped with our generation; an error for a body over the cap.
  result<std::vector<std::uint8_t>> encode_frame(frame_header header, const json& body) const;
  // Under send_mutex_: writes the frame now when nothing is queued, else queues it behind the
  // write in flight; "peer_lost" once closed or broken, "queue_full" over max_queue (which
  // breaks the send side when `close_on_full`: the connection is about to be shut).
  status send_locked(std::vector<std::uint8_t> frame, bool close_on_full);
  // For notifications and responses: a full queue closes the connection (the peer stopped
  // reading); a body over the cap is logged and, for a response, answered with an error instead.
  void send_or_close(const frame_header& header, const json& body);
  void write_next();  // on the strand; takes send_mutex_
  void shut(error reason);
  void fail_all_pending(const error& reason);
  void arm_deadline(clock::time_point at);  // on the strand
  void arm_deadline_soon(clock::time_point at);  // from any thread
  void expire_deadlines();

  socket_type socket_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  // One timer per channel, armed for the earliest pending deadline only: re-arming a timer per
  // request costs a timerfd update per request, which showed in the round-trip benchmark.
  boost::asio::steady_timer deadline_timer_;
  std::optional<clock::time_point> armed_for_;
  channel_options options_;
  message_handler on_message_;
  close_handler on_close_;
  // Incoming bytes: [read_begin_, read_end_) are received and not yet handled. Reading into a
  // buffer lets one read syscall bring a header and its body (and often the next frame).
  std::vector<std::uint8_t> read_buffer_ = std::vector<std::uint8_t>(64 * 1024);
  std::size_t read_begin_ = 0;
  std::size_t read_end_ = 0;
  // The send side. closed_ is set under send_mutex_ (with the socket's close, so no thread
  // writes to a closed descriptor) and read without it on the strand.
  std::mutex send_mutex_;
  std::deque<std::vector<std::uint8_t>> queue_;  // [0] is in flight while writing_
  bool writing_ = false;
  // Set when a frame was lost or torn (a failed write, a full queue that closes): every later
  // frame is refused until shut() closes the socket, so the peer never sees one after a gap.
  bool send_broken_ = false;
  std::atomic<bool> closed_{false};
  std::atomic<std::uint64_t> frames_sent_{0};  // written under send_mutex_
  std::uint64_t frames_handled_ = 0;           // on the strand
  std::atomic<std::uint64_t> next_request_id_{1};
  std::unordered_map<std::uint64_t, pending_request> pending_;  // under send_mutex_
};

}  // namespace orch::ipc
