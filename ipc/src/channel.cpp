#include "orch/ipc/channel.hpp"
#include "orch/ipc/errc.hpp"

#include <spdlog/spdlog.h>

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
    auto it = pending_.find(header.request_id);
    if (it == pending_.end()) {
      spdlog::debug("channel {}: late response to request {} dropped", options_.name,
                    header.request_id);
    } else {
      pending_request request = std::move(it->second);
      pending_.erase(it);
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

status channel::enqueue(frame_header header, const json& body) {
  if (closed_) return error{channel_errc::peer_lost, "channel " + options_.name + " is closed"};
  if (queue_.size() >= options_.max_queue + (writing_ ? 1 : 0)) {
    return error{channel_errc::queue_full,
                 "channel " + options_.name + ": outgoing queue is full (peer not reading?)"};
  }
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
  queue_.push_back(std::move(frame));
  if (!writing_) write_next();
  return ok_status();
}

void channel::send_or_close(const frame_header& header, const json& body) {
  auto sent = enqueue(header, body);
  if (sent.ok() || closed_) return;
  if (sent.err().code == channel_errc::queue_full) {
    shut(error{channel_errc::queue_full, "outgoing queue full: the peer stopped reading"});
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
  writing_ = true;
  // The frame stays at the queue's front (alive) until its write completes: one write in flight.
  asio::async_write(
      socket_, asio::buffer(queue_.front()),
      asio::bind_executor(
          strand_, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
            self->queue_.pop_front();
            self->writing_ = false;
            if (self->closed_) {
              self->queue_.clear();
              return;
            }
            if (ec) {
              self->shut(error{channel_errc::peer_lost, "write failed (" + ec.message() + ")"});
              return;
            }
            if (!self->queue_.empty()) self->write_next();
          }));
}

void channel::request(message_type type, json body, std::chrono::milliseconds deadline,
                      response_handler on_response) {
  asio::post(strand_, [self = shared_from_this(), type, body = std::move(body), deadline,
                       on_response = std::move(on_response)]() mutable {
    if (self->closed_) {
      on_response(error{channel_errc::peer_lost, "channel " + self->options_.name + " is closed"});
      return;
    }
    const std::uint64_t id = self->next_request_id_++;
    frame_header header;
    header.type = static_cast<std::uint16_t>(type);
    header.request_id = id;
    if (auto sent = self->enqueue(header, body); !sent) {
      on_response(sent.err());
      return;
    }
    const auto at = clock::now() + deadline;
    self->pending_.emplace(id, pending_request{std::move(on_response), at});
    self->arm_deadline(at);
  });
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
  std::vector<std::uint64_t> expired;
  std::optional<clock::time_point> next;
  for (const auto& [id, request] : pending_) {
    if (request.deadline <= now) {
      expired.push_back(id);
    } else if (!next || request.deadline < *next) {
      next = request.deadline;
    }
  }
  for (const std::uint64_t id : expired) {
    auto it = pending_.find(id);
    response_handler handler = std::move(it->second.handler);
    pending_.erase(it);
    handler(error{
        channel_errc::deadline_exceeded,
        "request " + std::to_string(id) + " on channel " + options_.name + " passed its deadline"});
  }
  if (next) arm_deadline(*next);
}

void channel::notify(message_type type, json body) {
  asio::post(strand_, [self = shared_from_this(), type, body = std::move(body)] {
    frame_header header;
    header.type = static_cast<std::uint16_t>(type);
    self->send_or_close(header, body);
  });
}

void channel::respond(const frame_header& to, json body) {
  asio::post(strand_, [self = shared_from_this(), to, body = std::move(body)] {
    frame_header header;
    header.type = to.type;
    header.flags = frame_flags::response;
    header.request_id = to.request_id;
    self->send_or_close(header, body);
  });
}

void channel::respond_error(const frame_header& to, const error& e) {
  asio::post(strand_, [self = shared_from_this(), to, body = error_body(e)] {
    frame_header header;
    header.type = to.type;
    header.flags = frame_flags::response | frame_flags::error;
    header.request_id = to.request_id;
    self->send_or_close(header, body);
  });
}

void channel::close(std::string reason) {
  asio::post(strand_, [self = shared_from_this(), reason = std::move(reason)] {
    self->shut(error{channel_errc::closed, reason});
  });
}

void channel::fail_all_pending(const error& reason) {
  auto pending = std::move(pending_);
  pending_.clear();
  deadline_timer_.cancel();
  armed_for_.reset();
  for (auto& [id, request] : pending) {
    request.handler(error{channel_errc::peer_lost,
                          "request " + std::to_string(id) + " failed: " + reason.message});
  }
}

void channel::shut(error reason) {
  if (closed_) return;
  closed_ = true;
  if (reason.code == channel_errc::peer_lost || reason.code == channel_errc::closed) {
    spdlog::info("channel {}: closed: {}", options_.name, reason.message);
  } else {
    spdlog::warn("channel {}: closing on protocol violation [{}]: {}", options_.name, reason.code,
                 reason.message);
  }
  boost::system::error_code ignored;
  socket_.shutdown(socket_type::shutdown_both, ignored);
  socket_.close(ignored);
  fail_all_pending(reason);
  if (on_close_) {
    auto handler = std::move(on_close_);
    on_close_ = nullptr;
    handler(reason);
  }
  on_message_ = nullptr;  // breaks cycles through captured shared_ptrs
}

}  // namespace orch::ipc
