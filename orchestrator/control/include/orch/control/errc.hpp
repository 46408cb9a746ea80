// The error codes of the control socket and its directory (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::control::control_errc {

// The server's side (control_socket.hpp): a connection from another uid, a request line over
// the cap, a request that is no JSON object, a handler that threw, a socket that cannot be bound.
inline constexpr const char* peer_refused = "peer_refused";
inline constexpr const char* request_too_large = "request_too_large";
inline constexpr const char* invalid_request = "invalid_request";
inline constexpr const char* internal_error = "internal_error";
inline constexpr const char* listen_failed = "listen_failed";
// The client's side (control_client.hpp): a socket that cannot be connected to (another
// user's, or a system error), a server that closed the connection or did not answer in time, a
// malformed answer, no server by that name.
inline constexpr const char* access_denied = "access_denied";
inline constexpr const char* connect_failed = "connect_failed";
inline constexpr const char* server_gone = "server_gone";
inline constexpr const char* answer_timeout = "answer_timeout";
inline constexpr const char* bad_response = "bad_response";
inline constexpr const char* not_found = "not_found";
// The control directory (control_directory.hpp): it cannot be made, or a file in it written.
inline constexpr const char* directory_unusable = "directory_unusable";
inline constexpr const char* file_io_failed = "file_io_failed";

}  // namespace orch::control::control_errc
