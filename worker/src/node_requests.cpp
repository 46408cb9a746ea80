#include "node_requests.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/futex.hpp"
#include "orch/support/poll_until.hpp"
#include "worker_errc.hpp"

namespace orch::worker {
namespace {

using namespace std::chrono_literals;
using ipc::message_type;

// How long the node thread polls for the next request before it sleeps: longer than the host takes
// to send a next call back to back (tens of µs), far shorter than the gap between prompts. Bounded
// in time, not in polls: 2000 yields were milliseconds of a core after every call, taken from the
// host and its clients whenever calls were not back to back (a prompt served over HTTP).
constexpr auto poll_before_sleep = 100us;

// How long a frame on the lane may take to arrive whole once it began, and an answer to leave:
// the host reads its lane while its call is out, so only a broken host takes longer.
constexpr auto lane_frame_limit = 30s;

}  // namespace

status node_requests::open(ipc::unique_fd lane_socket, ipc::unique_fd lane_page,
                           std::uint32_t generation) {
  if (!lane_socket.valid()) return ok_status();
  auto page = ipc::lane_memory::attach(std::move(lane_page));
  if (!page) return page.err();
  lane_ = std::make_unique<ipc::lane_endpoint>(
      ipc::lane_socket(std::move(lane_socket), "worker " + env_name_, generation),
      std::move(*page), ipc::lane_side::worker);
  wake_word_ = &lane_->wake_word();
  lane_open_.store(true, std::memory_order_release);
  return ok_status();
}

void node_requests::enqueue(pending_call call) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(call));
  }
  // Ordered with the node thread's `sleeping_` store then `queued_` load: one of the two threads
  // sees the other's write, so a request never waits for a thread asleep.
  queued_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) wake();
}

bool node_requests::stop() {
  bool busy = false;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    busy = busy_.load();
  }
  wake();
  return busy;
}

void node_requests::wake() { ipc::futex_wake(*wake_word_); }

std::optional<pending_call> node_requests::next() {
  while (true) {
    const bool lane = lane_open_.load(std::memory_order_relaxed);  // only this thread shuts it
    auto lane_call_waiting = [&] { return lane && lane_->waiting(); };
    poll_until([&] { return queued_.load(std::memory_order_acquire) != 0 || lane_call_waiting(); },
               poll_before_sleep, [&] { return lane && lane_->shares_cpu(); });
    if (auto call = take_queued()) return call;
    if (lane_call_waiting()) {
      if (auto call = take_from_lane()) return call;
      continue;
    }
    // The word first: whatever wakes us after this load (a call, a request, stop) ends the sleep.
    const std::uint32_t seen = wake_word_->load(std::memory_order_seq_cst);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return std::nullopt;
    }
    // Asleep until the lane has a frame, the queue a request, or the worker stops.
    sleeping_.store(true, std::memory_order_seq_cst);
    const bool lane_idle = !lane || lane_->begin_sleep();
    if (lane_idle && queued_.load(std::memory_order_seq_cst) == 0) {
      ipc::futex_wait(*wake_word_, seen, std::nullopt);
    }
    sleeping_.store(false, std::memory_order_relaxed);
    if (lane) lane_->woke();
  }
}

std::optional<pending_call> node_requests::take_queued() {
  if (queued_.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (stopping_ || queue_.empty()) return std::nullopt;
  pending_call call = std::move(queue_.front());
  queue_.pop_front();
  queued_.fetch_sub(1, std::memory_order_release);
  busy_.store(true);
  return call;
}

// A call from the lane. The host uses the lane for calls only, one at a time; anything else on
// it, or a frame that breaks the protocol, shuts the lane, so the host's caller sees it closed at
// once (and loses this worker) instead of waiting for its deadline.
std::optional<pending_call> node_requests::take_from_lane() {
  auto frame = lane_->receive(std::chrono::steady_clock::now() + lane_frame_limit);
  if (!frame) {
    if (frame.err().code != ipc::channel_errc::peer_lost) {
      spdlog::error("worker {}: call lane shut: {}", env_name_, frame.err().message);
    }
    close_lane();
    return std::nullopt;
  }
  if (static_cast<message_type>(frame->header.type) != message_type::call ||
      (frame->header.flags & ipc::frame_flags::response) != 0) {
    spdlog::error("worker {}: call lane shut: a {} frame on it", env_name_,
                  ipc::to_string(static_cast<message_type>(frame->header.type)));
    close_lane();
    return std::nullopt;
  }
  if (!serving_lane_.load(std::memory_order_acquire)) {
    answer_error_on_lane(frame->header, {worker_errc::not_ready, "the worker is not set up yet"});
    return std::nullopt;
  }
  std::lock_guard lock(mutex_);
  if (stopping_) return std::nullopt;
  busy_.store(true);
  return pending_call{message_type::call, frame->header, std::move(frame->body), true};
}

void node_requests::close_lane() {
  lane_->shut_down();
  lane_open_.store(false, std::memory_order_release);
}

void node_requests::answer(const pending_call& call, nlohmann::json response,
                           ipc::channel& channel) {
  busy_.store(false);
  if (call.on_lane) return answer_on_lane(call.header, std::move(response), channel.frames_sent());
  channel.respond(call.header, std::move(response));
}

// The answer goes with the count of frames this worker sent on its channel before it: the host
// handles them (progress, messages, lease notes) before its caller sees the answer.
void node_requests::answer_on_lane(const ipc::frame_header& to, nlohmann::json response,
                                   std::uint64_t channel_frames) {
  if (!lane_open_.load(std::memory_order_relaxed)) return;
  response["channel_frames"] = channel_frames;
  ipc::frame_header header;
  header.type = to.type;
  header.flags = ipc::frame_flags::response;
  header.request_id = to.request_id;
  send_on_lane(header, response);
}

void node_requests::answer_error_on_lane(const ipc::frame_header& to, const error& e) {
  ipc::frame_header header;
  header.type = to.type;
  header.flags = ipc::frame_flags::response | ipc::frame_flags::error;
  header.request_id = to.request_id;
  send_on_lane(header, ipc::error_body(e));
}

void node_requests::send_on_lane(const ipc::frame_header& header, const nlohmann::json& body) {
  auto st = lane_->send(header, body, std::chrono::steady_clock::now() + lane_frame_limit);
  if (st) return;
  if (st.err().code == ipc::channel_errc::body_too_large &&
      (header.flags & ipc::frame_flags::error) == 0) {
    // As on the channel: the caller still gets an answer rather than waiting for its deadline.
    return answer_error_on_lane(header, {st.err().code, "response body over the cap"});
  }
  spdlog::error("worker {}: call lane shut: {}", env_name_, st.err().message);
  close_lane();
}

}  // namespace orch::worker
