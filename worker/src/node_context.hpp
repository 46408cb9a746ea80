// node_context: the orch_node_context the worker lends node code during one call (docs/nodes.md).
// It forwards to the worker's memory (pool buffers, pager regions, cast buffers, the budget) and
// to the channel (allocation requests, progress), and records the node's typed error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "orch/ipc/descriptor.hpp"
#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"
#include "worker_memory.hpp"

namespace orch::worker {

struct node_call_hooks {
  // Asks the host for a pool block (blocking; the host alone writes allocation metadata).
  std::function<result<ipc::buffer_descriptor>(std::uint64_t)> allocate;
  std::function<void(std::uint64_t, std::uint64_t)> progress;
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
  std::vector<ipc::buffer_descriptor> allocations_;
};

// Fills contiguous row-major strides; returns the element count, 0 when the shape is invalid.
std::uint64_t contiguous_strides(std::uint32_t ndim, const std::int64_t* shape,
                                 std::int64_t* strides) noexcept;
std::uint64_t dtype_size(std::uint32_t dtype) noexcept;

}  // namespace orch::worker
