// call_lane: a node call written and answered on the caller's own thread (docs/runtime.md, "The
// call lane"). Each env has one; each worker generation that said it reads a lane gets a socket
// and a shared page of its own for it (ipc/lane_endpoint.hpp). An uncontended call from a thread
// other than the io thread is then: the caller writes the call in the page, the worker's node
// thread, polling, takes it, runs the node and writes the answer there, the caller, polling,
// takes it. Two threads, as in a raw round trip, where the router's path crosses five, and no
// system call while both poll (docs/performance.md, "The call path").
//
// The io thread keeps everything that must never wait for a node, and the lane defers to it:
//   - one call at a time per worker: the lane is taken only while the router has no call in
//     flight or queued, and the router leaves its queue alone while a lane call holds the worker
//     (the lane's end hands the queue back to it);
//   - the frames the worker sent on its channel before its answer (progress, messages, lease
//     notes) are handled by the io thread before the lane call returns: the answer says how many
//     there were, and the caller waits for that count;
//   - a fault (the lane closed or broken, a frame out of protocol, the deadline passed) is the
//     worker's loss, decided on the io thread like any other (supervisor::lose); the caller gets
//     the loss's error, or deadline_exceeded;
//   - a worker lost while a lane call is out (a crash, a hang the heartbeat found, kill_busy) has
//     its lane shut by the io thread: the caller wakes with the loss's error.
//
// Threading: open, close, take_for_router, release_from_router and frames_handled run on the io
// thread; call on any other thread, any number at once (all but one fall back).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/lane_endpoint.hpp"
#include "orch/runtime/call_histogram.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

class call_lane {
 public:
  struct handlers {
    // Posts the loss of `generation` for `why` to the io thread (supervisor::lose).
    std::function<void(std::uint32_t generation, std::string why)> lose;
    // Posts the router's next dispatch to the io thread: a call queued behind a lane call.
    std::function<void()> dispatch;
    // Posts a models report from a lane call's answer to the io thread (supervisor::report_models).
    std::function<void(std::uint32_t generation, nlohmann::json answer)> report_models;
  };

  call_lane(std::string env, handlers h);
  call_lane(const call_lane&) = delete;
  call_lane& operator=(const call_lane&) = delete;

  // io thread: `generation` is ready and reads its calls from `endpoint`'s other end;
  // `deadline` is its calls' deadline.
  void open(std::unique_ptr<ipc::lane_endpoint> endpoint, std::uint32_t generation,
            std::chrono::milliseconds deadline);
  // io thread: `generation` is gone. A lane call still out gets `why`; later calls fall back.
  void close(std::uint32_t generation, const error& why);
  // io thread: the router takes the worker for its next call; false while a lane call holds it
  // (its end posts handlers::dispatch).
  bool take_for_router();
  // io thread: the router has nothing in flight or queued.
  void release_from_router();
  // io thread: the generation's channel has handled `frames` frames from the worker.
  void frames_handled(std::uint32_t generation, std::uint64_t frames);
  // A lane call is out now.
  bool busy() const;
  // The models report of `generation` the io thread applied last (from either path): a lane
  // answer that reports the same models needs no post.
  void models_applied(const nlohmann::json& models);

  // Any thread but the io thread: the worker's checked answer (ipc::check_call_response passed,
  // its models report applied or posted), or its error; nullopt when the lane was not free (no
  // ready generation with a lane, the router's call out or queued, another lane call out): the
  // router's path is the caller's then.
  std::optional<result<nlohmann::json>> call(const nlohmann::json& body);

  // Call durations on this lane, from the call written to its answer.
  call_histogram durations() const;

 private:
  result<nlohmann::json> exchange(ipc::lane_endpoint& endpoint, std::uint32_t generation,
                                  const nlohmann::json& body,
                                  std::chrono::steady_clock::time_point deadline);
  // A fault on the lane: the worker is lost on the io thread; returns the loss's error.
  error fail(std::uint32_t generation, const std::string& why);
  // Waits until the channel handled `frames` frames of `generation`, or it was lost.
  status wait_for_frames(std::uint32_t generation, std::uint64_t frames,
                         std::chrono::steady_clock::time_point deadline);
  // The lane is free again: a queued router call is dispatched, a new models report posted.
  void finish(std::uint32_t generation, const nlohmann::json* answer);

  const std::string env_;
  const handlers handlers_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a loss, frames handled
  std::shared_ptr<ipc::lane_endpoint> endpoint_;  // the open generation's; null when none
  std::uint32_t generation_ = 0;
  std::chrono::milliseconds deadline_{0};
  bool router_holds_ = false;
  bool router_waiting_ = false;
  bool lane_busy_ = false;
  std::optional<error> loss_;  // of generation_, once lost
  std::uint64_t frames_handled_ = 0;
  bool waiting_for_frames_ = false;
  nlohmann::json models_;  // the last report applied or posted
  call_histogram durations_;
  std::uint64_t next_id_ = 1;
};

}  // namespace orch::runtime
