#include "orch/ipc/lane_endpoint.hpp"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "orch/ipc/errc.hpp"

namespace orch::ipc {

lane_endpoint::lane_endpoint(lane_socket socket, lane_memory memory, unique_fd wake_in,
                             unique_fd wake_out, lane_side side)
    : socket_(std::move(socket)),
      memory_(std::move(memory)),
      wake_in_(std::move(wake_in)),
      wake_out_(std::move(wake_out)),
      side_(side) {}

lane_box& lane_endpoint::outgoing() const noexcept {
  return side_ == lane_side::host ? memory_.page().calls : memory_.page().answers;
}

lane_box& lane_endpoint::incoming() const noexcept {
  return side_ == lane_side::host ? memory_.page().answers : memory_.page().calls;
}

status lane_endpoint::send(frame_header header, const json& body, clock::time_point deadline) {
  auto frame = socket_.encode(header, body);
  if (!frame) return frame.err();
  lane_box& box = outgoing();
  const std::uint64_t number = sent_ + 1;
  if (frame->size() > lane_box_capacity) {
    if (auto st = socket_.send_encoded(deadline); !st) return st;
    sent_ = number;
    box.sent.store(number, std::memory_order_seq_cst);
    return ok_status();
  }
  std::memcpy(box.bytes, frame->data(), frame->size());
  box.length.store(frame->size(), std::memory_order_relaxed);
  box.boxed.store(number, std::memory_order_release);
  sent_ = number;
  box.sent.store(number, std::memory_order_seq_cst);
  // After the count, both sequentially consistent: a reader that marked itself asleep before it
  // looked at the count is seen here.
  if (box.reader_asleep.load(std::memory_order_seq_cst) != 0) {
    const std::uint64_t one = 1;
    // Full only after 2^64 - 2 wakes nobody read; the peer gone is the socket's to say.
    (void)!::write(wake_out_.get(), &one, sizeof one);
  }
  return ok_status();
}

bool lane_endpoint::waiting() const noexcept {
  return early_.has_value() || incoming().sent.load(std::memory_order_acquire) > taken_;
}

bool lane_endpoint::shares_cpu() noexcept {
  const int cpu = ::sched_getcpu();
  if (cpu < 0) return false;
  const auto mine = static_cast<std::uint32_t>(cpu) + 1;
  lane_box& in = incoming();
  if (in.reader_cpu.load(std::memory_order_relaxed) != mine) {
    in.reader_cpu.store(mine, std::memory_order_relaxed);
  }
  return outgoing().reader_cpu.load(std::memory_order_relaxed) == mine;
}

result<message> lane_endpoint::receive(std::optional<clock::time_point> deadline) {
  lane_box& box = incoming();
  while (true) {
    if (early_) {
      message m = std::move(*early_);
      early_.reset();
      ++taken_;
      return m;
    }
    const bool counted = box.sent.load(std::memory_order_acquire) > taken_;
    if (counted && box.boxed.load(std::memory_order_acquire) == taken_ + 1) return take_from_box();
    // A frame on the socket: counted and not boxed (the count moves after the frame is written
    // there), or not counted yet.
    if (socket_.readable()) {
      auto frame = socket_.receive(deadline);
      if (!frame) return frame.err();
      ++taken_;
      return frame;
    }
    // Counted, not boxed: the socket wakes us when its frame comes. Else the box or the socket
    // does, and the other side must know we sleep.
    result<bool> slept = true;
    if (counted) {
      slept = sleep(deadline);
    } else if (begin_sleep()) {
      slept = sleep(deadline);
    }
    box.reader_asleep.store(0, std::memory_order_relaxed);
    if (!slept) return slept.err();
    if (!*slept) {
      return error{channel_errc::deadline_exceeded,
                   "lane " + socket_.name() + ": no frame arrived before its deadline"};
    }
  }
}

result<bool> lane_endpoint::sleep(std::optional<clock::time_point> deadline) {
  while (true) {
    int timeout = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
      if (left.count() <= 0) return false;
      timeout = static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
    }
    pollfd fds[2] = {{socket_.fd(), POLLIN, 0}, {wake_in_.get(), POLLIN, 0}};
    const int n = ::poll(fds, 2, timeout);
    if (n > 0) {
      if (fds[1].revents != 0) {
        std::uint64_t count = 0;
        (void)!::read(wake_in_.get(), &count, sizeof count);
      }
      return true;  // a wake, a frame, or the socket hung up: the caller's next look says which
    }
    if (n < 0 && errno != EINTR) {
      return error{channel_errc::peer_lost, "lane " + socket_.name() + ": poll failed (" +
                                                std::string(std::strerror(errno)) + ")"};
    }
  }
}

bool lane_endpoint::begin_sleep() noexcept {
  lane_box& box = incoming();
  box.reader_asleep.store(1, std::memory_order_seq_cst);
  return !early_ && box.sent.load(std::memory_order_seq_cst) <= taken_;
}

status lane_endpoint::woke(bool readable) {
  incoming().reader_asleep.store(0, std::memory_order_relaxed);
  if (!readable || early_) return ok_status();
  auto frame = socket_.receive(clock::now());  // only what is there: never blocks
  if (frame) {
    early_ = std::move(*frame);
  } else if (frame.err().code != channel_errc::deadline_exceeded) {
    return frame.err();
  }
  return ok_status();
}

result<message> lane_endpoint::take_from_box() {
  const lane_box& box = incoming();
  const std::uint64_t length = box.length.load(std::memory_order_relaxed);
  if (length > lane_box_capacity) {
    return error{lane_errc::bad_box, "lane " + socket_.name() + ": a box that says it holds " +
                                         std::to_string(length) + " bytes, over its " +
                                         std::to_string(lane_box_capacity)};
  }
  // Copied before any byte is checked: the other side may still be writing the page.
  copy_.resize(length);
  std::memcpy(copy_.data(), box.bytes, length);
  auto m = socket_.decode(copy_);
  if (m) ++taken_;
  return m;
}

}  // namespace orch::ipc
