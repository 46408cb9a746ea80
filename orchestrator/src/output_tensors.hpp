// output_tensors: the host's check of the tensors a worker returns, before it hands any of them
// to another call (issue 10). A node's claim about its output (dtype, shape, descriptor) is
// untrusted: a shape larger than its block made the consumer in another worker read other
// blocks' data, or crash, and the innocent consumer took the blame. Checked here, a lie is the
// producer's error, raised while the producer is still the node being called.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/lease_table.hpp"
#include "orch/support/result.hpp"

namespace orch::orchestrator {

// The code of a refused output: the producer's execution_error type.
inline constexpr const char* invalid_output = "invalid_output";

// Checks every tensor value in `outputs` (a call response's list; nested lists too):
//   - it decodes strictly and dtype × shape fits its descriptor's size (ipc::tensor_from_json,
//     the same rule the consumer's worker applies again);
//   - `holder` (the host) holds a lease on the block it names, and the descriptor claims no more
//     of it than was leased (ipc::lease_table::leased_size).
// Errors: invalid_output; the message starts with `producer` and names the output slot, the
// claimed layout and bytes, and the buffer's size.
status check_output_tensors(const nlohmann::json& outputs, const ipc::lease_table& leases,
                            ipc::process_id holder, const std::string& producer);

}  // namespace orch::orchestrator
