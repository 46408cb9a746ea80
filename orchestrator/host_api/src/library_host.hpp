// library_host: the host runtime as liborch_host.so's callers drive it (orch/host/host.h,
// docs/host-library.md). Unlike the executor, which holds a prompt's outputs until the next
// prompt, the caller here is itself an executor (ComfyUI's): it holds each block it allocated
// or was handed until it releases it, and any block it holds may be a tensor input of any call.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"

namespace orch::host_api {

class library_host {
 public:
  using event_fn = std::function<void(const std::string& type, const nlohmann::json& data)>;

  // start_deployment and settle_workers over a prepared deployment (host_startup.hpp);
  // `events` gets "worker" and "progress" events from the io thread.
  static result<std::unique_ptr<library_host>> start(const runtime::prepared_deployment& prepared,
                                                     const std::string& worker_executable,
                                                     const process::install_layout& layout,
                                                     event_fn events);
  library_host(const library_host&) = delete;
  library_host& operator=(const library_host&) = delete;
  ~library_host();  // stop()

  // The classes of the running workers (each worker's own schema, with its "env"), the workers,
  // the envs that run none and why, and every env of the deployment with its node directory and
  // state: what a ComfyUI pack needs to bind its directories to envs (docs/host-library.md).
  nlohmann::json nodes();
  std::uint64_t begin_prompt() { return ++epoch_; }

  // A node call (host.h, orch_host_call): the response, or the error that refused the request
  // before it was sent ("invalid_request", "missing_node_type", check_input_tensors' errors).
  // A call that ran and failed is a response with status "error".
  result<nlohmann::json> call(const nlohmann::json& request);

  struct block {
    ipc::buffer_descriptor descriptor;
    void* data;
  };
  result<block> allocate(std::uint64_t size);
  // This process's bytes of a block the caller holds. Errors: "not_held", pool errors.
  result<void*> map(const ipc::buffer_descriptor& d);
  // Drops one hold. Errors: "not_held".
  orch::status release(const ipc::buffer_descriptor& d);

  nlohmann::json free(bool unload_models, bool free_memory);
  // Every worker's models as the host's stand-ins hold them: env, key, size, resident (the last
  // receipt's figure), sequence, and the worker generation they belong to.
  nlohmann::json models();
  // Evicts `bytes` from env's worker of that generation (host_runtime::evict_env).
  result<nlohmann::json> evict(const std::string& env, std::uint32_t generation,
                               std::uint64_t bytes);
  // Charges `bytes` of the caller's own pinning (ComfyUI's pin_memory) to the host's slot of the
  // one pinned budget, so host and workers together never exceed it. Errors: "budget_exceeded".
  orch::status pinned_reserve(std::uint64_t bytes);
  // Returns at most what pinned_reserve holds for the caller.
  void pinned_release(std::uint64_t bytes);
  nlohmann::json status_json();
  void interrupt();
  // Releases every hold, then shuts the workers down. Idempotent.
  void stop();

 private:
  library_host() = default;
  struct hold {
    ipc::buffer_descriptor descriptor;
    bool owned;  // allocated here (freed on release), else handed over by a call
  };
  std::vector<ipc::buffer_descriptor> held_descriptors();

  std::unique_ptr<runtime::host_runtime> host_;
  nlohmann::json envs_ = nlohmann::json::array();  // every env of the inventory, run or not
  std::mutex mutex_;  // guards holds_
  std::vector<hold> holds_;
  // Calls before the first begin_prompt() belong to epoch 1: 0 is "before any prompt", which a
  // worker reads as already interrupted.
  std::atomic<std::uint64_t> epoch_{1};
  // What the caller's own pinning holds of the host's slot, which the pool shares: a release
  // never returns more than this, so a caller's unbalanced release cannot free the pool's share.
  std::atomic<std::uint64_t> caller_pinned_{0};
  bool stopped_ = false;
};

}  // namespace orch::host_api
