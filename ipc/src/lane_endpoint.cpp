#include "orch/ipc/lane_endpoint.hpp"

#include <sched.h>

#include <cstring>
#include <string>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/futex.hpp"

namespace orch::ipc {

lane_endpoint::lane_endpoint(lane_socket socket, lane_memory memory, lane_side side)
    : socket_(std::move(socket)), memory_(std::move(memory)), side_(side) {}

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
  const bool boxed = frame->size() <= lane_box_capacity;
  if (boxed) {
    std::memcpy(box.bytes, frame->data(), frame->size());
    box.length.store(frame->size(), std::memory_order_relaxed);
    box.boxed.store(number, std::memory_order_release);
  }
  // A frame for the socket is counted before it is written: a frame larger than the socket's
  // buffer is written only as its reader reads, so its reader must be awake and reading first.
  sent_ = number;
  box.sent.store(number, std::memory_order_seq_cst);
  // After the count, both sequentially consistent: a reader that marked itself asleep before it
  // looked at the count is seen here.
  if (box.reader_asleep.load(std::memory_order_seq_cst) != 0) wake_reader(box);
  return boxed ? ok_status() : socket_.send_encoded(deadline);
}

void lane_endpoint::wake_reader(lane_box& box) noexcept { futex_wake(box.wake); }

bool lane_endpoint::waiting() const noexcept {
  return incoming().sent.load(std::memory_order_acquire) > taken_;
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
    if (shut_.load(std::memory_order_seq_cst)) {
      return error{channel_errc::peer_lost, "lane " + socket_.name() + ": shut down"};
    }
    if (waiting()) {
      if (box.boxed.load(std::memory_order_acquire) == taken_ + 1) return take_from_box();
      return take_from_socket(deadline);  // counted, not boxed: it is on the socket
    }
    if (deadline && clock::now() >= *deadline) {
      return error{channel_errc::deadline_exceeded,
                   "lane " + socket_.name() + ": no frame arrived before its deadline"};
    }
    // The word first: a wake after this load (a frame, or either side's shut_down) ends the sleep.
    const std::uint32_t seen = box.wake.load(std::memory_order_seq_cst);
    // A frame on the socket before its count moved, or the other side's end shut (it wakes us
    // after shutting it): the socket says which.
    if (socket_.readable()) return take_from_socket(deadline);
    if (begin_sleep() && !shut_.load(std::memory_order_seq_cst)) {
      futex_wait(box.wake, seen, deadline);
    }
    woke();
  }
}

bool lane_endpoint::begin_sleep() noexcept {
  lane_box& box = incoming();
  box.reader_asleep.store(1, std::memory_order_seq_cst);
  return box.sent.load(std::memory_order_seq_cst) <= taken_;
}

void lane_endpoint::woke() noexcept {
  incoming().reader_asleep.store(0, std::memory_order_relaxed);
}

void lane_endpoint::shut_down() noexcept {
  shut_.store(true, std::memory_order_seq_cst);
  socket_.shut_down();
  wake_reader(incoming());  // this end's own reader, asleep on its word
  wake_reader(outgoing());  // the other side's, which then finds the socket shut
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

result<message> lane_endpoint::take_from_socket(std::optional<clock::time_point> deadline) {
  auto frame = socket_.receive(deadline);
  if (frame) ++taken_;
  return frame;
}

}  // namespace orch::ipc
