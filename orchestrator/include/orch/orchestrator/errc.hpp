// The orchestrator's error codes (docs/errors.md). The host's errors that reach a user as
// ComfyUI's exception_type carry these names, so they are part of the `--json` output.
#pragma once

namespace orch::orchestrator::runtime_errc {

// Workers and the router (supervisor.hpp).
inline constexpr const char* unknown_env = "unknown_env";      // no worker for that env
inline constexpr const char* not_ready = "not_ready";          // the worker is not (yet) up
inline constexpr const char* pack_failed = "pack_failed";      // it could not start its pack
inline constexpr const char* worker_died = "worker_died";      // lost during the call
inline constexpr const char* shutting_down = "shutting_down";  // the host is stopping
inline constexpr const char* bad_response = "bad_response";    // a malformed response body
inline constexpr const char* spawn_failed = "spawn_failed";    // fork or its set-up failed
inline constexpr const char* exec_failed = "exec_failed";      // the worker could not exec

// Tensors a worker returned, or is about to be sent (output_tensors.hpp).
inline constexpr const char* invalid_output = "invalid_output";
inline constexpr const char* invalid_input = "invalid_input";

// Start-up (host_memory.hpp, process_limits.hpp, plugin_probe.hpp).
inline constexpr const char* bad_slot = "bad_slot";
inline constexpr const char* not_found = "not_found";
inline constexpr const char* fd_limit = "fd_limit";
inline constexpr const char* probe_failed = "probe_failed";

// Bringing a deployment up (host_startup.hpp).
inline constexpr const char* invalid_deployment = "invalid_deployment";  // diagnostics say why
// A ComfyUI tree description (orch_host_start's comfyui) that is not JSON or has a bad field.
inline constexpr const char* invalid_description = "invalid_description";
inline constexpr const char* memory_unreadable = "memory_unreadable";    // /proc/meminfo, cgroup

// liborch_host.so's callers (library_host.hpp): a request that is not a call, and a block the
// caller does not hold (a class no worker runs is ipc's missing_node_type).
inline constexpr const char* invalid_request = "invalid_request";
inline constexpr const char* not_held = "not_held";
// A call that waits for a worker's answer, made on the io thread (from an event callback),
// which is the thread that would deliver it.
inline constexpr const char* wrong_thread = "wrong_thread";
// An eviction meant for a worker generation that was replaced: its models went with it.
inline constexpr const char* stale_generation = "stale_generation";

// `comfy-orch serve` (serve_http.hpp): the address cannot be bound.
inline constexpr const char* listen_failed = "listen_failed";
// serve's files (serve_files.hpp): a multipart/form-data body that cannot be read
// (multipart_form.hpp); a file name or subfolder that is no plain relative path (empty,
// absolute, a `..` component, a NUL byte), or one that leads through a symlink
// (confined_path.hpp); an input, output or temp directory that cannot be created or opened; a
// file that cannot be read or written. An absent file is `not_found`.
inline constexpr const char* invalid_form = "invalid_form";
inline constexpr const char* bad_path = "bad_path";
inline constexpr const char* symlink_refused = "symlink_refused";
inline constexpr const char* directory_unusable = "directory_unusable";
inline constexpr const char* file_io_failed = "file_io_failed";

// The control socket of `serve` (control_socket.hpp, control_client.hpp): a connection from
// another uid, a request line over the cap, a handler that threw; on the client's side, a
// socket that cannot be connected to (another user's, or a system error), a server that closed
// the connection or did not answer in time. A malformed answer is `bad_response`, an unknown
// request `invalid_request`.
inline constexpr const char* peer_refused = "peer_refused";
inline constexpr const char* request_too_large = "request_too_large";
inline constexpr const char* internal_error = "internal_error";
inline constexpr const char* access_denied = "access_denied";
inline constexpr const char* connect_failed = "connect_failed";
inline constexpr const char* server_gone = "server_gone";
inline constexpr const char* answer_timeout = "answer_timeout";

// The env manager (env_install.hpp, env_backend.hpp): a backend tool that failed (the message
// names the package where the tool's output says which, and the log), an env manager file (lock,
// build directory, stamp) that cannot be made, and an env that a pixi-only feature needs
// another backend for.
inline constexpr const char* install_failed = "install_failed";
inline constexpr const char* workspace_unusable = "workspace_unusable";
inline constexpr const char* needs_pixi = "needs_pixi";

// Prompts (prompt.hpp): ComfyUI's type for a prompt that cannot be read.
inline constexpr const char* invalid_prompt = "invalid_prompt";

}  // namespace orch::orchestrator::runtime_errc
