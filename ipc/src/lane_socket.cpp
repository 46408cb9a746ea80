#include "orch/ipc/lane_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "orch/ipc/errc.hpp"

namespace orch::ipc {

lane_socket::lane_socket(unique_fd fd, std::string name, std::uint32_t generation,
                         std::uint32_t max_body)
    : fd_(std::move(fd)), name_(std::move(name)), generation_(generation), max_body_(max_body) {
  if (fd_.valid()) ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
}

result<bool> lane_socket::wait(short events, std::optional<clock::time_point> deadline) const {
  while (true) {
    int timeout = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
      if (left.count() <= 0) return false;
      timeout = static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
    }
    pollfd p{fd_.get(), events, 0};
    const int n = ::poll(&p, 1, timeout);
    if (n > 0) return true;  // ready, or hung up: the read or write that follows says which
    if (n < 0 && errno != EINTR) {
      return error{channel_errc::peer_lost, "lane " + name_ + ": poll failed (" +
                                                std::string(std::strerror(errno)) + ")"};
    }
  }
}

result<std::span<const std::uint8_t>> lane_socket::encode(frame_header header, const json& body) {
  const std::vector<std::uint8_t> encoded = encode_body(body);
  if (encoded.size() > max_body_) {
    return error{channel_errc::body_too_large, "lane " + name_ + ": a body of " +
                                                   std::to_string(encoded.size()) +
                                                   " bytes is over the cap of " +
                                                   std::to_string(max_body_)};
  }
  header.body_length = static_cast<std::uint32_t>(encoded.size());
  header.generation = generation_;
  const header_bytes head = encode_header(header);
  out_.resize(frame_header_size + encoded.size());
  std::memcpy(out_.data(), head.data(), head.size());
  std::memcpy(out_.data() + frame_header_size, encoded.data(), encoded.size());
  return std::span<const std::uint8_t>(out_);
}

status lane_socket::send(frame_header header, const json& body, clock::time_point deadline) {
  if (auto frame = encode(header, body); !frame) return frame.err();
  return send_encoded(deadline);
}

status lane_socket::send_encoded(clock::time_point deadline) {
  for (std::size_t sent = 0; sent < out_.size();) {
    const ssize_t n = ::send(fd_.get(), out_.data() + sent, out_.size() - sent,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto ready = wait(POLLOUT, deadline);
      if (!ready) return ready.err();
      if (!*ready) {
        return error{channel_errc::deadline_exceeded,
                     "lane " + name_ + ": the peer did not take a frame before its deadline"};
      }
      continue;
    }
    return error{channel_errc::peer_lost,
                 "lane " + name_ + ": write failed (" + std::string(std::strerror(errno)) + ")"};
  }
  return ok_status();
}

result<message> lane_socket::receive(std::optional<clock::time_point> deadline) {
  while (true) {
    const std::size_t available = end_ - begin_;
    if (available >= frame_header_size) {
      header_bytes head{};
      std::memcpy(head.data(), buffer_.data() + begin_, frame_header_size);
      auto header = decode_header(head, max_body_);
      if (!header) return header.err();  // before any body byte is used
      const std::size_t frame = frame_header_size + header->body_length;
      if (available >= frame) return take_frame(frame, *header);
      if (buffer_.size() - begin_ < frame) {  // room for the frame, validated above
        std::memmove(buffer_.data(), buffer_.data() + begin_, available);
        begin_ = 0;
        end_ = available;
        if (buffer_.size() < frame) buffer_.resize(frame);
      }
    }
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (end_ == buffer_.size()) {  // a frame's start at the very end: move it to the front
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    const ssize_t n = ::recv(fd_.get(), buffer_.data() + end_, buffer_.size() - end_, MSG_DONTWAIT);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      return error{channel_errc::peer_lost,
                   "lane " + name_ + ": the peer closed it" +
                       std::string(end_ != begin_ ? " mid-frame" : "")};
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return error{channel_errc::peer_lost,
                   "lane " + name_ + ": read failed (" + std::string(std::strerror(errno)) + ")"};
    }
    auto ready = wait(POLLIN, deadline);
    if (!ready) return ready.err();
    if (!*ready) {
      return error{channel_errc::deadline_exceeded,
                   "lane " + name_ + ": no frame arrived before its deadline"};
    }
  }
}

result<message> lane_socket::take_frame(std::size_t frame_size, const frame_header& header) {
  const std::span<const std::uint8_t> body(buffer_.data() + begin_ + frame_header_size,
                                           header.body_length);
  begin_ += frame_size;  // the buffer stays valid until the next receive
  return finish_frame(header, body);
}

result<message> lane_socket::decode(std::span<const std::uint8_t> frame) const {
  if (frame.size() < frame_header_size) {
    return error{lane_errc::bad_box, "lane " + name_ + ": a frame of " +
                                         std::to_string(frame.size()) +
                                         " bytes is shorter than its header"};
  }
  header_bytes head{};
  std::memcpy(head.data(), frame.data(), frame_header_size);
  auto header = decode_header(head, max_body_);
  if (!header) return header.err();
  if (frame.size() != frame_header_size + header->body_length) {
    return error{lane_errc::bad_box, "lane " + name_ + ": a frame of " +
                                         std::to_string(frame.size()) +
                                         " bytes whose header says " +
                                         std::to_string(header->body_length) + " of body"};
  }
  return finish_frame(*header, frame.subspan(frame_header_size));
}

result<message> lane_socket::finish_frame(const frame_header& header,
                                          std::span<const std::uint8_t> bytes) const {
  auto body = decode_body(header.type, header.flags, bytes);
  if (!body) return body.err();
  if (header.generation != generation_) {
    return error{lane_errc::wrong_generation,
                 "lane " + name_ + ": a frame of generation " + std::to_string(header.generation) +
                     " on the lane of generation " + std::to_string(generation_)};
  }
  return message{header, std::move(*body)};
}

bool lane_socket::readable() const noexcept {
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

void lane_socket::shut_down() noexcept {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace orch::ipc
