// The error codes of the live views (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::live::live_errc {

// A view asked for with a parameter it does not take (live_views.hpp).
inline constexpr const char* invalid_request = "invalid_request";

}  // namespace orch::live::live_errc
