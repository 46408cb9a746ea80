// process_limits: the open-file limit a run needs, checked (and raised where allowed) before
// anything starts. Each worker costs the host a few descriptors (its channel, its fd socket, the
// segments it maps); at `ulimit -n 8` Boost.Asio could not even create its reactor and the host
// aborted. Every host needs it, the one ComfyUI loads too (start_deployment, host_startup.hpp),
// so it is process's, not the CLI's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "orch/support/result.hpp"

namespace orch::process {

// Descriptors a host with `workers` workers may hold at once, with room for the logger,
// the plugins and the prompt file.
std::uint64_t descriptors_needed(std::size_t workers) noexcept;

// Raises the soft RLIMIT_NOFILE towards the hard one when it is below `needed` (what servers
// commonly do; the hard limit is the operator's). Errors: "fd_limit" when even the hard limit is
// below `needed`, naming both numbers and `ulimit -n` as the fix.
status ensure_open_file_limit(std::uint64_t needed);

}  // namespace orch::process
