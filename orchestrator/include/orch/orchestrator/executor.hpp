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
#include "orch/orchestrator/prompt_validation.hpp"

namespace orch::orchestrator {

struct node_outcome {
  std::string class_type;
  std::string env;
  // One value per slot: as the worker returned them for a node called once; for a node mapped
  // over lists (list_mapping.hpp), each slot's list of items.
  nlohmann::json outputs = nlohmann::json::array();
  nlohmann::json inputs_seen = nlohmann::json::object();  // tensors as the worker mapped them
  double call_us = 0;  // host -> worker -> host for this node's call(s)
  // ComfyUI's view of the outputs: per slot, the list of items consumers are mapped over.
  nlohmann::json output_lists = nlohmann::json::array();
  // What the class's IS_CHANGED gave for this node's literal inputs (ComfyUI's cache key
  // ingredient); null when it has none or it failed, which ComfyUI reads as "always changed".
  nlohmann::json change_key;
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
  // The VALIDATE_INPUTS of a class, run in its worker: pass it to validate_prompt.
  custom_validation worker_validation();
  // The class's IS_CHANGED for node `node`'s literal inputs, run in its worker; null when the
  // class has none or it failed (ComfyUI: always changed).
  nlohmann::json change_key(const prompt& p, const prompt_node& node, const node_class& cls);
  // Reaches the running node through its context (interrupted()), and stops this executor
  // before its next node (execution_interrupted), for this and every later run. Safe from any
  // thread but the io thread.
  void interrupt();
  // Lets runs go on after an interrupt: `serve` calls it before each queued prompt, as ComfyUI
  // clears its interrupt flag when a prompt starts.
  void clear_interrupt() noexcept { interrupted_.store(false); }
  void release_outputs() noexcept;
  // The pool blocks the host holds for the last prompt's outputs.
  std::vector<ipc::buffer_descriptor> held_outputs() const { return held_; }

 private:
  // One node call through the router; moves the leases of its outputs to the host.
  result<nlohmann::json> call_node(const std::string& env, const nlohmann::json& body);
  // call_node, and once more after freeing through the stand-ins if the device was too full.
  result<nlohmann::json> call_with_retry(const std::string& env, const nlohmann::json& body);
  // Calls node `id` once per item of its input lists; fills `n`, or returns the execution_error
  // data (exception_type, exception_message, traceback).
  std::optional<nlohmann::json> run_node(const prompt& p, const std::string& id,
                                         const node_class& cls,
                                         const std::map<std::string, nlohmann::json>& lists,
                                         std::uint64_t epoch, node_outcome& n);

  host_runtime& host_;
  event_sink& events_;
  std::atomic<std::uint64_t> epoch_{0};
  std::atomic<bool> interrupted_{false};
  std::vector<ipc::buffer_descriptor> held_;
  bool progress_hooked_ = false;  // run() set the supervisor's on_progress to this executor
};

}  // namespace orch::orchestrator
