// divergence_check: the host against each worker, over one live status document
// (process_status.hpp; docs/cli.md, "diverge"). Every difference gets what differs with both
// values, why it matters and what to do. It compares the memory manager with each side's reason,
// the protocol level, the pager plugin's name and version, the settings the adapter dropped, the
// mirrored settings field by field (what the host sent against what the worker applied), the
// free-memory view mode, the pinned budget each process draws on and the cgroup it sees, the cast
// buffers' high-water mark against their bound, and each of the worker's models against the
// host's stand-in for it. A pure function of the document, so the rules are tested without a
// server.
#pragma once

#include <nlohmann/json.hpp>

namespace orch::live {

// {"divergent": bool, "differences": [{process, kind, field, host, worker, severity, explanation,
// fix, acknowledged}]}. severity "divergence" counts; "note" is said but never makes a process
// divergent. `divergent` is true when any divergence is not acknowledged (ORCH_DIVERGENCE_ACK).
nlohmann::json find_divergences(const nlohmann::json& status);

}  // namespace orch::live
