#include "orch/runtime/call_lane.hpp"

#include <spdlog/spdlog.h>

#include "orch/support/poll_until.hpp"

#include "orch/ipc/errc.hpp"
#include "orch/ipc/response_bodies.hpp"
#include "orch/runtime/errc.hpp"

namespace orch::runtime {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

// How long a caller whose lane failed waits for the io thread to decide the loss, before it
// answers with the lane's own reason: the io thread never waits for a node, so it is only ever
// late when the host is stopping.
constexpr auto loss_decision_limit = std::chrono::seconds(10);

// How long a caller polls the lane for its answer before it sleeps on the lane's page:
// an empty node's answer comes within a few us, and a wake-up from sleep costs 3 to 60 us on a
// VM (docs/performance.md, "Floors"); a longer node costs the caller this much CPU once.
constexpr auto answer_poll = std::chrono::microseconds(50);

// The key of a lane answer that counts the frames the worker sent on its channel before it.
constexpr const char* channel_frames_key = "channel_frames";

}  // namespace

call_lane::call_lane(std::string env, handlers h) : env_(std::move(env)), handlers_(std::move(h)) {}

void call_lane::open(std::unique_ptr<ipc::lane_endpoint> endpoint, std::uint32_t generation,
                     std::chrono::milliseconds deadline) {
  std::lock_guard lock(mutex_);
  endpoint_ = std::move(endpoint);
  generation_ = generation;
  deadline_ = deadline;
  loss_.reset();
  frames_handled_ = 0;
  router_holds_ = false;
  models_ = json();
}

void call_lane::close(std::uint32_t generation, const error& why) {
  std::lock_guard lock(mutex_);
  if (generation != generation_ || loss_) return;
  loss_ = why;
  if (endpoint_) endpoint_->shut_down();  // wakes a caller asleep on it; the fd stays its own
  endpoint_.reset();
  changed_.notify_all();
}

bool call_lane::take_for_router() {
  std::lock_guard lock(mutex_);
  if (lane_busy_) {
    router_waiting_ = true;
    return false;
  }
  router_holds_ = true;
  return true;
}

void call_lane::release_from_router() {
  std::lock_guard lock(mutex_);
  router_holds_ = false;
}

void call_lane::frames_handled(std::uint32_t generation, std::uint64_t frames) {
  std::lock_guard lock(mutex_);
  if (generation != generation_) return;
  frames_handled_ = frames;
  if (waiting_for_frames_) changed_.notify_all();
}

bool call_lane::busy() const {
  std::lock_guard lock(mutex_);
  return lane_busy_;
}

void call_lane::models_applied(const json& models) {
  std::lock_guard lock(mutex_);
  models_ = models;
}

call_histogram call_lane::durations() const {
  std::lock_guard lock(mutex_);
  return durations_;
}

std::optional<result<json>> call_lane::call(const json& body) {
  std::shared_ptr<ipc::lane_endpoint> endpoint;
  std::uint32_t generation = 0;
  clock_type::time_point deadline;
  {
    std::lock_guard lock(mutex_);
    if (!endpoint_ || loss_ || router_holds_ || lane_busy_) return std::nullopt;
    lane_busy_ = true;
    endpoint = endpoint_;
    generation = generation_;
    deadline = clock_type::now() + deadline_;
  }
  const auto sent = clock_type::now();
  result<json> answer = exchange(*endpoint, generation, body, deadline);
  {
    std::lock_guard lock(mutex_);
    durations_.observe(std::chrono::duration<double>(clock_type::now() - sent).count());
  }
  finish(generation, answer ? &*answer : nullptr);
  return answer;
}

result<json> call_lane::exchange(ipc::lane_endpoint& endpoint, std::uint32_t generation,
                                 const json& body, clock_type::time_point deadline) {
  ipc::frame_header header;
  header.type = static_cast<std::uint16_t>(ipc::message_type::call);
  header.request_id = next_id_++;  // under lane_busy_: one caller at a time
  if (auto st = endpoint.send(header, body, deadline); !st) {
    if (st.err().code == ipc::channel_errc::body_too_large) return st.err();  // nothing sent
    return fail(generation, "could not be sent a call on its lane (" + st.err().message + ")");
  }
  // Then asleep on the page: a worker lost is shut by the io thread (close), which wakes us.
  poll_until([&] { return endpoint.waiting(); }, answer_poll, [&] { return endpoint.shares_cpu(); });
  auto frame = endpoint.receive(deadline);
  if (!frame) {
    if (frame.err().code == ipc::channel_errc::deadline_exceeded) {
      fail(generation, "did not answer a call within its deadline");
      return error{ipc::channel_errc::deadline_exceeded,
                   "the call on env " + env_ + "'s lane passed its deadline of " +
                       std::to_string(deadline_.count()) + " ms"};
    }
    return fail(generation, "broke its call lane (" + frame.err().message + ")");
  }
  if (frame->header.request_id != header.request_id ||
      (frame->header.flags & ipc::frame_flags::response) == 0) {
    return fail(generation, "sent a frame on its call lane that answers no call");
  }
  if ((frame->header.flags & ipc::frame_flags::error) != 0) {
    return ipc::error_from_body(frame->body);
  }
  json& answer = frame->body;
  // The frames sent on the channel ahead of the answer are handled before the caller sees it.
  const auto frames = answer.find(channel_frames_key);
  if (frames == answer.end() || !frames->is_number_unsigned()) {
    return fail(generation, "answered on its call lane without its channel's frame count");
  }
  if (auto st = wait_for_frames(generation, frames->get<std::uint64_t>(), deadline); !st) {
    return st.err();
  }
  answer.erase(frames);
  if (auto st = ipc::check_call_response(answer); !st) {
    // As on the router's path: a body without the shape of docs/protocol.md fails the call, and
    // nothing in it is believed, its models report included.
    return error{runtime_errc::bad_response, st.err().message};
  }
  return std::move(answer);
}

status call_lane::wait_for_frames(std::uint32_t generation, std::uint64_t frames,
                                  clock_type::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (generation == generation_ && !loss_ && frames_handled_ >= frames) return ok_status();
  waiting_for_frames_ = true;
  const bool done = changed_.wait_until(lock, deadline, [&] {
    return generation != generation_ || loss_ || frames_handled_ >= frames;
  });
  waiting_for_frames_ = false;
  if (done && generation == generation_ && !loss_) return ok_status();
  if (generation == generation_ && loss_) return *loss_;
  lock.unlock();
  if (!done) {
    return fail(generation, "answered on its call lane after " + std::to_string(frames) +
                                " frames on its channel that never arrived");
  }
  return error{runtime_errc::worker_died, "the worker for env " + env_ + " was replaced"};
}

error call_lane::fail(std::uint32_t generation, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (generation == generation_ && endpoint_) endpoint_.reset();  // no lane call after a fault
  }
  if (handlers_.lose) handlers_.lose(generation, why);
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, loss_decision_limit,
                    [&] { return generation != generation_ || loss_.has_value(); });
  if (generation == generation_ && loss_) return *loss_;
  return error{runtime_errc::worker_died,
               "worker for env " + env_ + " (generation " + std::to_string(generation) + ") " + why};
}

void call_lane::finish(std::uint32_t generation, const json* answer) {
  bool dispatch = false;
  bool report = false;
  {
    std::lock_guard lock(mutex_);
    lane_busy_ = false;
    dispatch = std::exchange(router_waiting_, false);
    if (answer != nullptr && answer->contains("models") && (*answer)["models"] != models_) {
      models_ = (*answer)["models"];
      report = true;
    }
  }
  if (report && handlers_.report_models) handlers_.report_models(generation, *answer);
  if (dispatch && handlers_.dispatch) handlers_.dispatch();
}

}  // namespace orch::runtime
