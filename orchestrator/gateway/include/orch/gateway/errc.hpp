// The error codes of `comfy-orch gateway` (docs/errors.md).
#pragma once

namespace orch::gateway::gateway_errc {

// A host did not answer: no connection, a timeout, a broken answer (host_link.hpp).
inline constexpr const char* host_unreachable = "host_unreachable";
// A host answered with an HTTP status that is not 200 (its status and body in the message).
inline constexpr const char* host_refused = "host_refused";
// A host's answer is larger than the gateway takes (host_link::download's cap).
inline constexpr const char* answer_too_large = "answer_too_large";
// The fleet file or the secret cannot be used (fleet_config.hpp).
inline constexpr const char* invalid_config = "invalid_config";
// The address cannot be bound.
inline constexpr const char* listen_failed = "listen_failed";
// The Ray driver could not be started, or said it failed (host_source.hpp).
inline constexpr const char* driver_failed = "driver_failed";

}  // namespace orch::gateway::gateway_errc
