// The error codes of the executor: prompts and the values between nodes (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::executor::executor_errc {

// Prompts (prompt.hpp): ComfyUI's type for a prompt that cannot be read.
inline constexpr const char* invalid_prompt = "invalid_prompt";
// A list input that cannot be mapped, or a list output of the wrong shape (list_mapping.hpp).
inline constexpr const char* invalid_input = "invalid_input";
inline constexpr const char* invalid_output = "invalid_output";

}  // namespace orch::executor::executor_errc
