// node_context: the orch_node_context the worker lends node code during one call (docs/nodes.md).
// It forwards to the worker's memory (pool buffers, pager regions, cast buffers, the budget) and
// to the channel (allocation requests, progress), and records the node's typed error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/segment_table.hpp"
#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"
#include "worker_memory.hpp"

namespace orch::worker {

struct node_call_hooks {
  // Asks the host for a pool block (blocking; the host alone writes allocation metadata).
  std::function<result<ipc::buffer_descriptor>(std::uint64_t)> allocate;
  std::function<void(std::uint64_t, std::uint64_t)> progress;
  // The call's "hidden" map (kind -> value), or null: what orch_node_api.hidden answers.
  const nlohmann::json* hidden = nullptr;
};

class node_context_impl {
 public:
  // `interrupted_epoch` is the latest epoch the host interrupted; this call belongs to `epoch`.
  node_context_impl(worker_memory& memory, node_call_hooks hooks, std::string node_id,
                    std::uint64_t epoch,
                    const std::atomic<std::uint64_t>& interrupted_epoch) noexcept;

  orch_node_context* context() noexcept { return &context_; }
  const std::string& node_id() const noexcept { return node_id_; }
  const std::string& error_type() const noexcept { return error_type_; }
  const std::string& error_message() const noexcept { return error_message_; }
  const std::vector<std::string>& error_traceback() const noexcept { return error_traceback_; }
  // The UI dict the node gave (orch_node_api.ui), or null.
  const nlohmann::json& ui() const noexcept { return ui_; }
  // The subgraph the node expands into (orch_node_api.expand), or null.
  const nlohmann::json& expand() const noexcept { return expand_; }
  // Blocks this call allocated, so those the node did not return can be given back.
  const std::vector<ipc::buffer_descriptor>& allocations() const noexcept { return allocations_; }

  static const orch_node_api* api() noexcept;

 private:
  friend struct node_api_impl;
  orch_node_context context_;
  worker_memory* memory_;
  node_call_hooks hooks_;
  std::string node_id_;
  std::uint64_t epoch_;
  const std::atomic<std::uint64_t>* interrupted_epoch_;
  std::string error_type_;
  std::string error_message_;
  std::vector<std::string> error_traceback_;
  std::map<std::string, std::string> hidden_text_;  // orch_node_api.hidden's answers, kept
  nlohmann::json ui_;
  nlohmann::json expand_;
  std::vector<ipc::buffer_descriptor> allocations_;
};

// The view a node gets of a tensor input ({"tensor": …}'s object, docs/protocol.md). Built only
// after the same check the host made before handing it over (defence in depth: a host bug or a
// forged call must give the consumer node a clean error, not a read past its buffer): the fields
// decode strictly and dtype × shape fits the descriptor's size (ipc::tensor_from_json), and the
// descriptor is live and within its block in this process's mapping (segment_table::bytes).
// Strides are contiguous (the wire carries none). Errors: ipc::body_errc::*, ipc::tensor_errc::*,
// ipc::descriptor_errc::*; the message names the claimed layout and the buffer.
result<orch_tensor> tensor_view(const nlohmann::json& tensor, const ipc::segment_table& segments);

}  // namespace orch::worker
