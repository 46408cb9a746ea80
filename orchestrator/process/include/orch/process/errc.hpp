// The error codes of processes: spawning, tools and limits (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::process::process_errc {

// fork or its set-up failed; the child could not exec (child_process.hpp, tool_process.hpp).
inline constexpr const char* spawn_failed = "spawn_failed";
inline constexpr const char* exec_failed = "exec_failed";
// A tool that is not there (tool_process.hpp).
inline constexpr const char* not_found = "not_found";
// The descriptor limit cannot be raised far enough (process_limits.hpp).
inline constexpr const char* fd_limit = "fd_limit";

}  // namespace orch::process::process_errc
