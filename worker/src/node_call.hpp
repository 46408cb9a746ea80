// node_call: one `call` request run against the worker's node set (docs/protocol.md, "call"):
// the node's execute at a node boundary, or one of ComfyUI's class methods (nodes.h, ABI 1.2)
// outside any. The runtime owns the channel and the state; this is what a call does with them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "node_set.hpp"
#include "orch/ipc/descriptor.hpp"
#include "orch/support/result.hpp"
#include "worker_memory.hpp"

namespace orch::worker {

// What a call reads and updates in the worker that runs it.
struct node_call_state {
  worker_memory& memory;
  std::atomic<std::uint64_t>& epoch;  // the prompt epoch, set by each node call that carries one
  const std::atomic<std::uint64_t>& interrupted_epoch;
  std::atomic<std::uint64_t>& calls;  // node calls served, published to the host
  // A new pool block from the host (the `allocate` request), for output_tensor.
  std::function<result<ipc::buffer_descriptor>(std::uint64_t size)> allocate;
  // ComfyUI's progress event for node `node`.
  std::function<void(const std::string& node, std::uint64_t value, std::uint64_t max)> progress;
};

// The response body of a call request (docs/protocol.md): ok with outputs, inputs_seen,
// allocations and models, or error with the node's typed error.
nlohmann::json run_node_call(const node_set& nodes, const nlohmann::json& body,
                             node_call_state& state);

}  // namespace orch::worker
