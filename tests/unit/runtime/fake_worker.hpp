// fake_worker: an in-process stand-in for comfy-orch-worker, run by fake_launcher on a thread of
// its own instead of a forked process (STYLE.md on Ray's raylet and its fake process launcher).
// It speaks the real protocol over the descriptors the supervisor hands a worker, in the order
// worker/src/worker_runtime.cpp does: the token from the token pipe, the segments from the fd
// socket, then hello -> settings -> ready over the channel, heartbeats in its own slot's control
// block, and node calls answered one by one. A script says where it departs from a good worker.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/process/child_process.hpp"

namespace orch::runtime_testing {

// Wait statuses as waitpid(2) reports them.
constexpr int exited_with(int code) { return (code & 0xff) << 8; }
constexpr int killed_by(int signal) { return signal & 0x7f; }

// How the fake answers one node call.
struct fake_call_answer {
  nlohmann::json outputs = nlohmann::json::array();  // a successful call's outputs
  std::optional<nlohmann::json> ui;                  // the node's UI dict, if any
  std::string error_type;     // not empty: the node failed with this type (ipc::node_error_type)
  std::string error_message;  // and this message
  std::chrono::milliseconds delay{0};  // answered this much later (the node "runs")
  bool until_interrupted = false;  // answered "interrupted" once an interrupt of its epoch comes
  bool crash = false;              // the worker "dies" instead of answering
};

// Where one generation of the fake departs from a good worker. The default is a good worker
// with no node classes that answers every call with no outputs.
struct fake_worker_script {
  bool crash_before_hello = false;  // exits with `exit_status` before it says anything
  bool answer_hello = true;         // false: silent, so the handshake times out
  std::string hello_token;          // not empty: sent instead of the token it was given
  std::string setup_failure;        // not empty: setup_failed with this message, then exits 66
  std::string setup_failure_code;   // and this code
  bool crash_after_ready = false;   // exits with `exit_status` once ready was answered
  bool heartbeat = true;            // false: its heartbeat counter never moves (hung)
  int exit_status = exited_with(1);  // the wait status of a crash
  nlohmann::json nodes = nlohmann::json::array();  // the node classes of its ready message
  std::function<fake_call_answer(const nlohmann::json& body)> on_call;
};

// What every fake worker of one launcher saw, for the tests to read (any thread).
class fake_journal {
 public:
  struct call {
    std::string env;
    std::uint32_t generation = 0;
    nlohmann::json body;
  };
  void record_call(const std::string& env, std::uint32_t generation, const nlohmann::json& body);
  void record_interrupt(std::uint64_t epoch);
  std::vector<call> calls() const;
  // The node ids of the calls that ran a node (not a class method), in the order they came.
  std::vector<std::string> node_calls() const;
  std::vector<std::uint64_t> interrupts() const;
  // Waits until `count` calls for node `node` came; false after `limit`.
  bool wait_for_call(const std::string& node, std::size_t count, std::chrono::milliseconds limit);

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<call> calls_;
  std::vector<std::uint64_t> interrupts_;
};

class fake_worker {
 public:
  // Starts a fake worker with duplicates of `request`'s descriptors (the caller closes its own,
  // as the supervisor does once a child runs) and `pid` as its claimed pid.
  fake_worker(const process::spawn_request& request, pid_t pid, fake_worker_script script,
              std::shared_ptr<fake_journal> journal);
  fake_worker(const fake_worker&) = delete;
  fake_worker& operator=(const fake_worker&) = delete;
  ~fake_worker();  // killed, if still running, and joined

  // SIGKILL and the like: stops it where it is, unless it has ended already (an ended worker's
  // status stays the one it ended with, as a zombie's does).
  void kill(int signal) noexcept;
  // Waits up to `limit` for it to end; its wait status once it has, joined.
  std::optional<int> wait(std::chrono::milliseconds limit) noexcept;

  const std::string& env() const noexcept { return env_; }
  std::uint32_t generation() const noexcept { return generation_; }

 private:
  class session;  // the protocol side, on the worker's thread (fake_worker.cpp)
  void run() noexcept;
  // The status it ends with; false when it had one already.
  bool set_status(int status) noexcept;

  pid_t pid_;
  std::string env_;
  std::uint32_t generation_ = 0;
  fake_worker_script script_;
  std::shared_ptr<fake_journal> journal_;
  int channel_fd_ = -1, fd_socket_ = -1, token_fd_ = -1, output_fd_ = -1;  // duplicates
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  std::optional<int> status_;
  bool ended_ = false;
  std::shared_ptr<session> session_;  // under mutex_: how kill() reaches the running session
  std::thread thread_;
};

}  // namespace orch::runtime_testing
