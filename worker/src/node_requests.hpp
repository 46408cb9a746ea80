// node_requests: where a worker's node thread takes its requests from (docs/runtime.md,
// "Processes and threads" and "The call lane"), and where their answers go: the io thread's queue
// (the channel's calls, and the host's free and evict requests, answered on the channel) and the
// call lane (calls the host's caller wrote on the lane, answered there: ipc/lane_endpoint.hpp).
//
// Between requests the node thread polls the queue's count and the lane's count for a moment,
// so a request that follows within it is taken without a wake-up or a system call; then it
// sleeps on one futex word (ipc/futex.hpp): the lane's, which the host bumps when it writes a
// call, and which the io thread bumps too when it queues a request or stops the worker (without a
// lane, a word of its own).
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

class node_requests {
 public:
  explicit node_requests(std::string env_name) : env_name_(std::move(env_name)) {}
  node_requests(const node_requests&) = delete;
  node_requests& operator=(const node_requests&) = delete;

  // Takes the lane's end, if the host gave one (`lane_socket` valid: its socket and page), of
  // `generation`. Errors: the page's (lane_memory::attach).
  status open(ipc::unique_fd lane_socket, ipc::unique_fd lane_page, std::uint32_t generation);
  bool has_lane() const noexcept { return lane_open_.load(std::memory_order_acquire); }
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
  std::atomic<bool> sleeping_{false};
  // The lane: read and answered by the node thread only; null when the host gave none. Kept once
  // shut (lane_open_ false), so the word the node thread sleeps on stays mapped.
  std::unique_ptr<ipc::lane_endpoint> lane_;
  std::atomic<bool> lane_open_{false};
  std::atomic<bool> serving_lane_{false};
  std::atomic<std::uint32_t> own_wake_{0};
  std::atomic<std::uint32_t>* wake_word_ = &own_wake_;  // set once, at open
};

}  // namespace orch::worker
