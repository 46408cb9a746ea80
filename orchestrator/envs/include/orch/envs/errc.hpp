// The error codes of the env manager (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::envs::envs_errc {

// A backend tool that failed (the message names the package where the tool's output says
// which, and the log), and an env that a pixi-only feature needs another backend for
// (env_install.hpp, env_backend.hpp).
inline constexpr const char* install_failed = "install_failed";
inline constexpr const char* needs_pixi = "needs_pixi";
// No env by that name, or a request the env manager does not take (env_context.hpp).
inline constexpr const char* not_found = "not_found";
inline constexpr const char* invalid_request = "invalid_request";

}  // namespace orch::envs::envs_errc
