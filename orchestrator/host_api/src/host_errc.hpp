// The error codes of liborch_host.so's callers (docs/errors.md). Errors that reach a user as
// ComfyUI's exception_type carry these names; a code another library also uses is the same word
// there, declared by each library that makes it.
#pragma once

namespace orch::host_api::host_errc {

// A request that is not a call, and a block the caller does not hold (a class no worker runs is
// ipc's missing_node_type) (library_host.hpp); a ComfyUI description that is not JSON (host.h).
inline constexpr const char* invalid_request = "invalid_request";
inline constexpr const char* not_held = "not_held";
inline constexpr const char* invalid_description = "invalid_description";

}  // namespace orch::host_api::host_errc
