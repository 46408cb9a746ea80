// node_requests: where a worker's node thread takes its requests from (docs/runtime.md,
// "Processes and threads" and "The call lane"), and where their answers go: the io thread's queue
// (the channel's calls, and the host's free and evict requests, answered on the channel) and the
// call lane (calls the host's caller wrote on the lane, answered there: ipc/lane_endpoint.hpp).
//
// Between requests the node thread polls the queue's count and the lane's count for a moment,
// so a request that follows within it is taken without a wake-up or a system call; then it
// sleeps in poll(2) on the lane's socket and wake eventfd, and an eventfd the io thread writes when
// it queues a request while the node thread sleeps.
//
// Threading: enqueue, serve_lane and stop on the io thread; next and answer on the node thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/lane_endpoint.hpp"
#include "orch/ipc/message.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::worker {

// A request the node thread serves in order: node calls, and the host's free and evict requests
// (queued with the calls, so a release never races a running node). A call that came on the
// lane is answered there.
struct pending_call {
  ipc::message_type type = ipc::message_type::call;
  ipc::frame_header header;
  nlohmann::json body;
  bool on_lane = false;
};

// The worker's end of its call lane as the host sent it (docs/protocol.md, "The call lane").
struct lane_fds {
  ipc::unique_fd socket;
  ipc::unique_fd page;
  ipc::unique_fd calls_wake;    // the host writes it, for a call in the box while we sleep
  ipc::unique_fd answers_wake;  // we write it, for an answer in the box while the host sleeps
};

class node_requests {
 public:
  explicit node_requests(std::string env_name) : env_name_(std::move(env_name)) {}
  node_requests(const node_requests&) = delete;
  node_requests& operator=(const node_requests&) = delete;

  // Makes the wake-up and takes the lane's end, if the host gave one (`lane.socket` valid), of
  // `generation`. Errors: the eventfd's, the page's (lane_memory::attach).
  status open(lane_fds lane, std::uint32_t generation);
  bool has_lane() const noexcept { return lane_ != nullptr; }
  // io thread, once set up (before ready): calls on the lane are served from now on; until then
  // they are answered "not_ready".
  void serve_lane() noexcept { serving_lane_.store(true, std::memory_order_release); }
  void enqueue(pending_call call);
  // io thread, once the channel is gone: next() answers nullopt from now on. True when the node
  // thread is inside a request (the process then exits under it).
  bool stop();

  // node thread: the next request, nullopt once stopped.
  std::optional<pending_call> next();
  // node thread: the request is done; its answer goes where it came from. A lane answer carries
  // the frames sent on `channel` so far (docs/protocol.md, "The call lane").
  void answer(const pending_call& call, nlohmann::json response, ipc::channel& channel);

 private:
  void wake();
  std::optional<pending_call> take_queued();
  std::optional<pending_call> take_from_lane();
  void close_lane();
  void answer_on_lane(const ipc::frame_header& to, nlohmann::json response,
                      std::uint64_t channel_frames);
  void send_on_lane(const ipc::frame_header& header, const nlohmann::json& body);
  void answer_error_on_lane(const ipc::frame_header& to, const error& e);

  const std::string env_name_;
  std::mutex mutex_;
  std::deque<pending_call> queue_;
  bool stopping_ = false;
  std::atomic<bool> busy_{false};  // set under mutex_ when a request is taken
  std::atomic<int> queued_{0};
  ipc::unique_fd wake_fd_;
  std::atomic<bool> sleeping_{false};
  // The lane: read and answered by the node thread only; null when the host gave none or it was
  // shut.
  std::unique_ptr<ipc::lane_endpoint> lane_;
  std::atomic<bool> serving_lane_{false};
};

}  // namespace orch::worker
