// output_tensors: the host's check of the tensors it hands over between calls (docs/runtime.md). A
// node's claim about its output (dtype, shape, descriptor) is untrusted: a shape larger than its
// block made the consumer in another worker read other blocks' data, or crash, and the innocent
// consumer took the blame. Checked when the producer's call returns, a lie is the producer's
// error. Checked again when a call is sent, a tensor that no node of the prompt produced (one
// typed into the prompt, a host bug) never reaches a worker.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/lease_table.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

// Checks every tensor value in `outputs` (a call response's list; nested lists too):
//   - it decodes strictly and dtype × shape fits its descriptor's size (ipc::tensor_from_json,
//     the same rule the consumer's worker applies again);
//   - `holder` (the host) holds a lease on the block it names, and the descriptor claims no more
//     of it than was leased (ipc::lease_table::leased_size).
// Errors: runtime_errc::invalid_output (the producer's execution_error type); the message starts
// with `producer` and names the output slot, the claimed layout and bytes, and the buffer's size.
status check_output_tensors(const nlohmann::json& outputs, const ipc::lease_table& leases,
                            ipc::process_id holder, const std::string& producer);

// Checks every tensor value in a call's `inputs` (name → value) before the call is sent: as
// above, and the block is one of `produced` (the host's blocks for this prompt's outputs).
// Errors: runtime_errc::invalid_input, naming the input (the node never runs).
status check_input_tensors(const nlohmann::json& inputs, const ipc::lease_table& leases,
                           ipc::process_id holder,
                           std::span<const ipc::buffer_descriptor> produced);

// Every tensor descriptor inside a value (or list of values), in order; values that are no
// tensor, and descriptors that do not decode, are skipped.
std::vector<ipc::buffer_descriptor> tensor_descriptors(const nlohmann::json& values);

}  // namespace orch::runtime
