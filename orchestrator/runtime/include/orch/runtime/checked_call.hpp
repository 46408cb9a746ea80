// checked_call: one node call through the router with the host's checks on both sides
// (docs/runtime.md, "Outputs and leases"), for the executor and for liborch_host.so's callers:
//   - a tensor input must name a block in `held` (the blocks this caller holds), so a descriptor
//     typed into a prompt or a request never reaches a worker;
//   - the worker's body must have the protocol's shape;
//   - the blocks the node allocated and returned become the host's (one host lease each), and
//     each returned tensor must fit the block it names.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/runtime/awaitable.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

struct checked_call_result {
  result<nlohmann::json> response;
  std::vector<ipc::buffer_descriptor> handed;  // now leased to the host: the caller's to release
};

// Call from any thread but the io thread. `held` is read on the io thread while this waits.
// The blocking forms run the coroutines below on the io thread and wait for their result.
checked_call_result checked_call(host_runtime& host, const std::string& env,
                                 const nlohmann::json& body,
                                 const std::vector<ipc::buffer_descriptor>& held);

// checked_call, and once more after ComfyUI's free_memory through the stand-ins when the node's
// worker could not fit a model on the device (docs/memory-semantics.md).
checked_call_result call_with_retry(host_runtime& host, const std::string& env,
                                    const nlohmann::json& body,
                                    const std::vector<ipc::buffer_descriptor>& held);

// The same for a coroutine the io thread runs (the executor): it is suspended, not blocked,
// while the worker answers, and resumed on the io thread. The arguments must live until the
// result is back.
boost::asio::awaitable<checked_call_result> async_checked_call(
    host_runtime& host, const std::string& env, const nlohmann::json& body,
    const std::vector<ipc::buffer_descriptor>& held);
boost::asio::awaitable<checked_call_result> async_call_with_retry(
    host_runtime& host, const std::string& env, const nlohmann::json& body,
    const std::vector<ipc::buffer_descriptor>& held);

}  // namespace orch::runtime
