// executor: runs one validated prompt (docs/runtime.md, "Executor"; ComfyUI's execution.py order):
//   - a new epoch per prompt (workers reset per-prompt state when it changes);
//   - the dependency closure of the output nodes in topological order (execution_order);
//   - each node in its pack's worker, through the supervisor's router;
//   - outputs pass between workers as pool descriptors under a host lease, never as bytes: the
//     producer's lease becomes the host's when the call returns, and the consumer maps the same
//     block (docs/runtime.md, "Outputs and leases");
//   - ComfyUI's events go to the sink;
//   - with a cache policy (execution_cache.hpp), a node whose input signature was seen by an
//     earlier prompt is served from the cache instead of run (execution_cached).
// A prompt runs as a coroutine on the host's io thread (run_async), the thread that sends its
// calls and reads their answers: it is suspended while a worker computes, and nothing wakes
// another thread between a node's answer and the next node's call (docs/design-changes.md).
// run() is the same for a caller on another thread, which waits. The io thread must run until
// every prompt started on it has ended.
// The outputs of the last prompt stay leased until the next run or release_outputs(), so
// callers can read them; what the cache keeps stays leased until the cache drops it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/executor/events.hpp"
#include "orch/executor/execution_cache.hpp"
#include "orch/executor/prompt.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/ipc/descriptor.hpp"
#include "orch/runtime/awaitable.hpp"
#include "orch/runtime/host_runtime.hpp"

namespace orch::executor {

struct prompt_outcome {
  std::string prompt_id;
  std::uint64_t epoch = 0;
  bool ok = false;
  std::optional<nlohmann::json> error;  // the execution_error (or _interrupted) data
  std::map<std::string, node_outcome> nodes;  // every node that completed
};

class executor {
 public:
  // The default keeps nothing across prompts (`run`, one prompt); `serve` passes the
  // deployment's [server] cache.
  executor(runtime::host_runtime& host, event_sink& events,
           manifests::cache_policy cache = manifests::cache_policy::none, unsigned lru_prompts = 1)
      : host_(host), events_(events), cache_(cache, lru_prompts) {}
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor();  // release_outputs() and the cache's leases

  // `outputs` are the validated output node ids (validation_report::outputs). On the io thread
  // only, one prompt at a time; the arguments must live until it ends.
  boost::asio::awaitable<prompt_outcome> run_async(const prompt& p,
                                                   const std::vector<std::string>& outputs,
                                                   const std::string& prompt_id);
  // run_async, waited for: from any thread but the io thread.
  prompt_outcome run(const prompt& p, const std::vector<std::string>& outputs,
                     const std::string& prompt_id);
  // The VALIDATE_INPUTS of a class, run in its worker: pass it to validate_prompt, on a thread
  // that may wait for a worker (not the io thread).
  custom_validation worker_validation();
  // Reaches the running node through its context (interrupted()), and stops this executor
  // before its next node (execution_interrupted), for this and every later run. From any
  // thread.
  void interrupt();
  // Lets runs go on after an interrupt: `serve` calls it before each queued prompt, as ComfyUI
  // clears its interrupt flag when a prompt starts.
  void clear_interrupt() noexcept { interrupted_.store(false); }
  void release_outputs() noexcept;
  // ComfyUI's /free with free_memory: drops the execution cache and releases its leases, now
  // when no prompt runs, else when the running one ends. Returns the entries dropped now, or
  // nullopt when deferred. From any thread.
  std::optional<std::size_t> clear_cache();
  std::size_t cached_nodes();
  // The pool blocks the last prompt's outputs are in (held by the host for it or its cache).
  std::vector<ipc::buffer_descriptor> held_outputs() const { return readable_; }

 private:
  boost::asio::awaitable<prompt_outcome> run_prompt(const prompt& p,
                                                    const std::vector<std::string>& outputs,
                                                    const std::string& prompt_id);
  // One class-method call through the router (VALIDATE_INPUTS): waits for the worker. Moves
  // the leases of its outputs to the host.
  result<nlohmann::json> call_node(const std::string& env, const nlohmann::json& body);
  // The same on the io thread (IS_CHANGED).
  boost::asio::awaitable<result<nlohmann::json>> call_node_async(const std::string& env,
                                                                 const nlohmann::json& body);
  // A node call, and once more after freeing through the stand-ins if the device was too full;
  // the blocks of the outputs go to `handed`.
  boost::asio::awaitable<result<nlohmann::json>> call_with_retry(
      const std::string& env, const nlohmann::json& body,
      std::vector<ipc::buffer_descriptor>& handed);
  // Replaces, in a call's `inputs` for a node of `cls`, each handle of an object another env's
  // worker keeps with what that worker's internal class orch.export:<env> gives for it (its
  // registered serializer's payload, else its pickle, which `cls`'s worker unpickles;
  // docs/comfyui.md, "Objects across envs"). The blocks of the pickles are readable at once and
  // released with the prompt. Returns the execution_error data of an export that failed.
  boost::asio::awaitable<std::optional<nlohmann::json>> hand_over_objects(
      nlohmann::json& inputs, const runtime::node_class& cls, const std::string& id,
      std::uint64_t epoch);
  // Calls node `id` once per item of its input lists; fills `n` and `handed` (the blocks of its
  // outputs, now the host's), or returns the execution_error data (exception_type,
  // exception_message, traceback).
  boost::asio::awaitable<std::optional<nlohmann::json>> run_node(
      const prompt& p, const std::string& id, const runtime::node_class& cls,
      const std::map<std::string, nlohmann::json>& lists, std::uint64_t epoch, node_outcome& n,
      std::vector<ipc::buffer_descriptor>& handed);
  // The class's IS_CHANGED for node `node`'s literal inputs, run in its worker; null when the
  // class has none, nullopt when it failed (ComfyUI: always changed).
  boost::asio::awaitable<std::optional<nlohmann::json>> change_key(const prompt& p,
                                                                   const prompt_node& node,
                                                                   const runtime::node_class& cls);
  // The cache keys of the prompt's nodes, in execution order (producers first): each with
  // IS_CHANGED asked of its worker, as ComfyUI keys every node before it runs any.
  boost::asio::awaitable<std::map<std::string, cache_key>> cache_keys(
      const prompt& p, const std::vector<std::string>& order);
  // Drops the entries of envs whose worker was lost since they were kept, then what the policy
  // no longer keeps, and releases their leases (on the io thread).
  void prune_cache();
  void release(const std::vector<ipc::buffer_descriptor>& leases) noexcept;
  // On the io thread: clears the cache when clear_cache() asked; the entries dropped.
  std::size_t clear_cache_if_requested();

  runtime::host_runtime& host_;
  event_sink& events_;
  std::atomic<std::uint64_t> epoch_{0};
  std::atomic<bool> interrupted_{false};
  // The cache and the state below are the io thread's, as the prompt that uses them is.
  bool running_ = false;  // a prompt runs: clear_cache() waits for its end
  bool clear_cache_requested_ = false;
  execution_cache cache_;
  std::map<std::string, int> worker_losses_;  // each env's, when this prompt began
  // Leases the executor holds itself: outputs of this prompt that the cache did not take.
  std::vector<ipc::buffer_descriptor> owned_;
  // The blocks a node of this prompt may receive: its nodes' outputs, cached or not.
  std::vector<ipc::buffer_descriptor> readable_;
  // What each handle of another env's object was handed over as in this prompt (its pickle's
  // block is in owned_ and readable_ until the prompt ends): a list-mapped node exports it once.
  std::map<std::string, nlohmann::json> handed_over_;
  bool progress_hooked_ = false;  // a run set the supervisor's on_progress to this executor
  std::string progress_prompt_id_;
};

}  // namespace orch::executor
