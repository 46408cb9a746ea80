#include "orch/ipc/channel.hpp"
#include "orch/ipc/errc.hpp"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace orch::ipc {
namespace asio = boost::asio;

channel::channel(socket_type socket, channel_options options)
    : socket_(std::move(socket)),
      strand_(asio::make_strand(socket_.get_executor())),
      deadline_timer_(strand_),
      options_(std::move(options)) {}

std::shared_ptr<channel> channel::create(socket_type socket, channel_options options) {
  return std::shared_ptr<channel>(new channel(std::move(socket), std::move(options)));
}

void channel::start(message_handler on_message, close_handler on_close) {
  asio::post(strand_, [self = shared_from_this(), on_message = std::move(on_message),
                       on_close = std::move(on_close)]() mutable {
    self->on_message_ = std::move(on_message);
    self->on_close_ = std::move(on_close);
    self->read_more(frame_header_size);
  });
}

void channel::read_more(std::size_t need) {
  if (closed_) return;
  // Drop consumed bytes, then make sure the frame at the front fits. `need` only exceeds the
  // header size once that frame's header has passed validation, so the buffer never grows for
  // a length that breaks the cap.
  if (read_begin_ > 0) {
    std::memmove(read_buffer_.data(), read_buffer_.data() + read_begin_, read_end_ - read_begin_);
    read_end_ -= read_begin_;
    read_begin_ = 0;
  }
  if (read_buffer_.size() < need) read_buffer_.resize(need);
  socket_.async_read_some(
      asio::buffer(read_buffer_.data() + read_end_, read_buffer_.size() - read_end_),
      asio::bind_executor(
          strand_, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
            if (ec) {
              const bool mid_frame = self->read_end_ != self->read_begin_;
              self->shut(error{channel_errc::peer_lost, std::string("peer closed the connection") +
                                                            (mid_frame ? " mid-frame" : "") + " (" +
                                                            ec.message() + ")"});
              return;
            }
            self->read_end_ += n;
            self->process_input();
          }));
}

void channel::process_input() {
  // One read may bring several frames, or part of one: handle every complete frame, then read.
  std::size_t need = frame_header_size;
  while (!closed_) {
    const std::size_t available = read_end_ - read_begin_;
    if (available < frame_header_size) break;
    header_bytes head{};
    std::memcpy(head.data(), read_buffer_.data() + read_begin_, frame_header_size);
    auto header = decode_header(head, options_.max_body);
    if (!header) {
      // Validated before any body byte is used: a violation ends the connection.
      shut(header.err());
      return;
    }
    const std::size_t frame = frame_header_size + header->body_length;
    if (available < frame) {
      need = frame;
      break;
    }
    const std::span<const std::uint8_t> body(read_buffer_.data() + read_begin_ + frame_header_size,
                                             header->body_length);
    read_begin_ += frame;
    dispatch(*header, body);  // handlers only post to the strand: the buffer stays put
    ++frames_handled_;
    if (options_.on_frame_handled) options_.on_frame_handled(frames_handled_);
  }
  read_more(need);
}

void channel::dispatch(const frame_header& header, std::span<const std::uint8_t> bytes) {
  auto body = decode_body(header.type, header.flags, bytes);
  if (!body) {
    if (body.err().code == body_errc::unknown_type) {
      // Unknown types are logged and dropped, not asserted on (docs/references.md, anchors §8.4.1):
      // a newer peer may add some.
      spdlog::warn("channel {}: dropping frame: {}", options_.name, body.err().message);
      return;
    }
    shut(body.err());
    return;
  }
  if (options_.accept_generation && header.generation != *options_.accept_generation) {
    spdlog::info("channel {}: dropping {} from generation {} (current {})", options_.name,
                 to_string(static_cast<message_type>(header.type)), header.generation,
                 *options_.accept_generation);
    return;
  }
  if ((header.flags & frame_flags::response) != 0) {
    std::optional<pending_request> found;
    {
      std::lock_guard lock(send_mutex_);
      if (auto it = pending_.find(header.request_id); it != pending_.end()) {
        found = std::move(it->second);
        pending_.erase(it);
      }
    }
    if (!found) {
      spdlog::debug("channel {}: late response to request {} dropped", options_.name,
                    header.request_id);
    } else {
      pending_request& request = *found;
      if ((header.flags & frame_flags::error) != 0) {
        request.handler(error_from_body(*body));
      } else {
        request.handler(message{header, std::move(*body)});
      }
    }
  } else if (on_message_) {
    on_message_(message{header, std::move(*body)});
  }
}

result<std::vector<std::uint8_t>> channel::encode_frame(frame_header header,
                                                        const json& body) const {
  std::vector<std::uint8_t> encoded = encode_body(body);
  // The peer's cap is the protocol's; a body over it would only get the connection closed.
  if (encoded.size() > options_.max_body) {
    return error{channel_errc::body_too_large,
                 "channel " + options_.name + ": a " +
                     std::string(to_string(static_cast<message_type>(header.type))) + " body of " +
                     std::to_string(encoded.size()) + " bytes is over the cap of " +
                     std::to_string(options_.max_body)};
  }
  header.body_length = static_cast<std::uint32_t>(encoded.size());
  header.generation = options_.generation;
  const header_bytes head = encode_header(header);
  std::vector<std::uint8_t> frame(frame_header_size + encoded.size());
  std::memcpy(frame.data(), head.data(), head.size());
  std::memcpy(frame.data() + frame_header_size, encoded.data(), encoded.size());
  return frame;
}

status channel::send_locked(std::vector<std::uint8_t> frame, bool close_on_full) {
  if (closed_ || send_broken_)
    return error{channel_errc::peer_lost, "channel " + options_.name + " is closed"};
  if (queue_.size() >= options_.max_queue + (writing_ ? 1 : 0)) {
    send_broken_ = close_on_full;  // nothing may follow the frame that was dropped
    return error{channel_errc::queue_full,
                 "channel " + options_.name + ": outgoing queue is full (peer not reading?)"};
  }
  if (!writing_) {
    // Nothing in flight: the socket takes the frame now, on this thread. A worker's answer then
    // leaves from its node thread instead of waking the io thread to write it
    // (docs/performance.md, "serve"). Whatever the socket does not take is queued.
    const ssize_t n = ::send(socket_.native_handle(), frame.data(), frame.size(),
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(frame.size())) {
      frames_sent_.fetch_add(1, std::memory_order_release);
      return ok_status();
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      const std::string why = std::strerror(errno);
      send_broken_ = true;  // nothing may follow the frame that was lost
      asio::post(strand_, [self = shared_from_this(), why] {
        self->shut(error{channel_errc::peer_lost, "write failed (" + why + ")"});
      });
      return ok_status();  // lost with the connection, as a failed async write is
    }
    frame.erase(frame.begin(), frame.begin() + std::max<ssize_t>(n, 0));
    writing_ = true;
    queue_.push_back(std::move(frame));
    frames_sent_.fetch_add(1, std::memory_order_release);
    asio::post(strand_, [self = shared_from_this()] { self->write_next(); });
    return ok_status();
  }
  queue_.push_back(std::move(frame));
  frames_sent_.fetch_add(1, std::memory_order_release);
  return ok_status();
}

void channel::send_or_close(const frame_header& header, const json& body) {
  auto frame = encode_frame(header, body);
  status sent = frame ? ok_status() : status(frame.err());
  if (frame) {
    std::lock_guard lock(send_mutex_);
    sent = send_locked(std::move(*frame), true);
  }
  if (sent.ok() || closed_) return;
  if (sent.err().code == channel_errc::queue_full) {
    asio::post(strand_, [self = shared_from_this()] {
      self->shut(error{channel_errc::queue_full, "outgoing queue full: the peer stopped reading"});
    });
    return;
  }
  spdlog::error("channel {}: not sent: {}", options_.name, sent.err().message);
  if ((header.flags & frame_flags::response) != 0 && (header.flags & frame_flags::error) == 0) {
    // The requester still gets an answer rather than waiting for its deadline.
    frame_header failure = header;
    failure.flags = frame_flags::response | frame_flags::error;
    // Short on purpose: the full message may not fit under the cap either (it is logged above).
    send_or_close(failure, error_body({sent.err().code, "response body over the cap"}));
  }
}

void channel::write_next() {
  std::lock_guard lock(send_mutex_);
  if (closed_) {
    queue_.clear();
    writing_ = false;
    return;
  }
  // The frame stays at the queue's front (alive: a deque keeps its elements in place) until its
  // write completes: one write in flight.
  asio::async_write(
      socket_, asio::buffer(queue_.front()),
      asio::bind_executor(
          strand_, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
            bool more = false;
            {
              std::lock_guard guard(self->send_mutex_);
              self->queue_.pop_front();
              if (ec) self->send_broken_ = true;  // what is queued cannot follow a torn frame
              more = !self->closed_ && !ec && !self->queue_.empty();
              if (!more) self->writing_ = false;
              if (self->closed_ || ec) self->queue_.clear();
            }
            if (more) return self->write_next();
            if (ec && !self->closed_) {
              self->shut(error{channel_errc::peer_lost, "write failed (" + ec.message() + ")"});
            }
          }));
}

void channel::request(message_type type, json body, std::chrono::milliseconds deadline,
                      response_handler on_response) {
  frame_header header;
  header.type = static_cast<std::uint16_t>(type);
  header.request_id = next_request_id_++;
  auto frame = encode_frame(header, body);
  status sent = frame ? ok_status() : status(frame.err());
  const auto at = clock::now() + deadline;
  if (frame) {
    // Registered before the frame leaves: the answer cannot arrive before its request is known.
    std::lock_guard lock(send_mutex_);
    auto it = pending_.emplace(header.request_id, pending_request{std::move(on_response), at});
    sent = send_locked(std::move(*frame), false);
    if (sent) return arm_deadline_soon(at);
    on_response = std::move(it.first->second.handler);
    pending_.erase(it.first);
  }
  asio::post(strand_, [on_response = std::move(on_response), e = sent.err()] { on_response(e); });
}

void channel::arm_deadline_soon(clock::time_point at) {
  asio::post(strand_, [self = shared_from_this(), at] { self->arm_deadline(at); });
}

void channel::arm_deadline(clock::time_point at) {
  if (closed_ || (armed_for_ && *armed_for_ <= at)) return;  // an earlier wake-up is set
  armed_for_ = at;
  deadline_timer_.expires_at(at);  // aborts the previous wait, if any
  deadline_timer_.async_wait(asio::bind_executor(
      strand_, [self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec) return;  // re-armed earlier, or the channel closed
        self->armed_for_.reset();
        self->expire_deadlines();
      }));
}

void channel::expire_deadlines() {
  const auto now = clock::now();
  std::vector<std::pair<std::uint64_t, response_handler>> expired;
  std::optional<clock::time_point> next;
  {
    std::lock_guard lock(send_mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        expired.emplace_back(it->first, std::move(it->second.handler));
        it = pending_.erase(it);
      } else {
        if (!next || it->second.deadline < *next) next = it->second.deadline;
        ++it;
      }
    }
  }
  for (auto& [id, handler] : expired) {
    handler(error{
        channel_errc::deadline_exceeded,
        "request " + std::to_string(id) + " on channel " + options_.name + " passed its deadline"});
  }
  if (next) arm_deadline(*next);
}

void channel::notify(message_type type, json body) {
  frame_header header;
  header.type = static_cast<std::uint16_t>(type);
  send_or_close(header, body);
}

bool channel::notify_if_room(message_type type, const json& body, std::size_t room) {
  frame_header header;
  header.type = static_cast<std::uint16_t>(type);
  auto frame = encode_frame(header, body);
  if (!frame) return false;
  std::lock_guard lock(send_mutex_);
  if (queue_.size() >= std::min(room, options_.max_queue)) return false;
  return send_locked(std::move(*frame), false).ok();
}

void channel::respond(const frame_header& to, json body) {
  frame_header header;
  header.type = to.type;
  header.flags = frame_flags::response;
  header.request_id = to.request_id;
  send_or_close(header, body);
}

void channel::respond_error(const frame_header& to, const error& e) {
  frame_header header;
  header.type = to.type;
  header.flags = frame_flags::response | frame_flags::error;
  header.request_id = to.request_id;
  send_or_close(header, error_body(e));
}

void channel::close(std::string reason) {
  asio::post(strand_, [self = shared_from_this(), reason = std::move(reason)] {
    self->shut(error{channel_errc::closed, reason});
  });
}

void channel::fail_all_pending(const error& reason) {
  decltype(pending_) pending;
  {
    std::lock_guard lock(send_mutex_);
    pending.swap(pending_);
  }
  deadline_timer_.cancel();
  armed_for_.reset();
  for (auto& [id, request] : pending) {
    request.handler(error{channel_errc::peer_lost,
                          "request " + std::to_string(id) + " failed: " + reason.message});
  }
}

void channel::shut(error reason) {
  {
    std::lock_guard lock(send_mutex_);
    if (closed_) return;
    closed_ = true;
    // Closed under the lock: no other thread is between its check of closed_ and its send.
    boost::system::error_code ignored;
    socket_.shutdown(socket_type::shutdown_both, ignored);
    socket_.close(ignored);
  }
  if (reason.code == channel_errc::peer_lost || reason.code == channel_errc::closed) {
    spdlog::info("channel {}: closed: {}", options_.name, reason.message);
  } else {
    spdlog::warn("channel {}: closing on protocol violation [{}]: {}", options_.name, reason.code,
                 reason.message);
  }
  fail_all_pending(reason);
  if (on_close_) {
    auto handler = std::move(on_close_);
    on_close_ = nullptr;
    handler(reason);
  }
  on_message_ = nullptr;  // breaks cycles through captured shared_ptrs
}

}  // namespace orch::ipc
