// executor: runs one validated prompt (docs/runtime.md, "Executor"; ComfyUI's execution.py order):
//   - a new epoch per prompt (workers reset per-prompt state when it changes);
//   - the dependency closure of the output nodes in topological order (execution_order);
//   - each node in its pack's worker, through the supervisor's router;
//   - outputs pass between workers as pool descriptors under a host lease, never as bytes: the
//     producer's lease becomes the host's when the call returns, and the consumer maps the same
//     block (docs/runtime.md, "Outputs and leases");
//   - ComfyUI's events go to the sink.
// The outputs of the last prompt stay leased until the next run or release_outputs(), so
// callers can read them.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/orchestrator/events.hpp"
#include "orch/orchestrator/host_runtime.hpp"
#include "orch/orchestrator/prompt.hpp"

namespace orch::orchestrator {

struct node_outcome {
  std::string class_type;
  std::string env;
  nlohmann::json outputs = nlohmann::json::array();  // as the worker returned them
  nlohmann::json inputs_seen = nlohmann::json::object();  // tensors as the worker mapped them
  double call_us = 0;  // host -> worker -> host for this node's call
};

struct prompt_outcome {
  std::string prompt_id;
  std::uint64_t epoch = 0;
  bool ok = false;
  std::optional<nlohmann::json> error;  // the execution_error (or _interrupted) data
  std::map<std::string, node_outcome> nodes;  // every node that completed
};

class executor {
 public:
  executor(host_runtime& host, event_sink& events) : host_(host), events_(events) {}
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor();  // release_outputs()

  // `outputs` are the validated output node ids (validation_report::outputs).
  prompt_outcome run(const prompt& p, const std::vector<std::string>& outputs,
                     const std::string& prompt_id);
  // Reaches the running node through its context (interrupted()), and stops this executor
  // before its next node (execution_interrupted), for this and every later run. Safe from any
  // thread but the io thread.
  void interrupt();
  void release_outputs() noexcept;
  // The pool blocks the host holds for the last prompt's outputs.
  std::vector<ipc::buffer_descriptor> held_outputs() const { return held_; }

 private:
  // One node call through the router; moves the leases of its outputs to the host.
  result<nlohmann::json> call_node(const std::string& env, const nlohmann::json& body);

  host_runtime& host_;
  event_sink& events_;
  std::atomic<std::uint64_t> epoch_{0};
  std::atomic<bool> interrupted_{false};
  std::vector<ipc::buffer_descriptor> held_;
};

}  // namespace orch::orchestrator
