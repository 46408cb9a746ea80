// The error codes of `comfy-orch gateway` (docs/errors.md).
#pragma once

namespace orch::gateway::gateway_errc {

// A host did not answer: no connection, a timeout, a broken answer (host_link.hpp).
inline constexpr const char* host_unreachable = "host_unreachable";
// Nothing listens at a host's address (its connection was refused): no request reached it.
inline constexpr const char* host_not_listening = "host_not_listening";
// A host answered with an HTTP status that is not 200 (its status and body in the message).
inline constexpr const char* host_refused = "host_refused";
// A host's answer is larger than the gateway takes (host_link::download's cap).
inline constexpr const char* answer_too_large = "answer_too_large";
// A prompt's input file is larger than the gateway sends a host, or it names more input files
// than it may (gateway_files.cpp).
inline constexpr const char* input_too_large = "input_too_large";
inline constexpr const char* too_many_inputs = "too_many_inputs";
// A host's history names an output file outside the gateway's store, or more files than a
// prompt may have (gateway_files.cpp).
inline constexpr const char* bad_output_path = "bad_output_path";
inline constexpr const char* too_many_outputs = "too_many_outputs";
// The fleet file or the secret cannot be used (fleet_config.hpp).
inline constexpr const char* invalid_config = "invalid_config";
// The gateway's state file cannot be used: no SQLite database, another program's, held by
// another gateway, or a write failed (gateway_state.hpp).
inline constexpr const char* state_unusable = "state_unusable";
// The address cannot be bound.
inline constexpr const char* listen_failed = "listen_failed";
// The Ray driver could not be started, or said it failed (host_source.hpp).
inline constexpr const char* driver_failed = "driver_failed";

}  // namespace orch::gateway::gateway_errc
