// The error codes of the host runtime: workers, the router, start-up (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::runtime::runtime_errc {

// Workers and the router (supervisor.hpp).
inline constexpr const char* unknown_env = "unknown_env";      // no worker for that env
inline constexpr const char* not_ready = "not_ready";          // the worker is not (yet) up
inline constexpr const char* pack_failed = "pack_failed";      // it could not start its pack
inline constexpr const char* worker_died = "worker_died";      // lost during the call
inline constexpr const char* shutting_down = "shutting_down";  // the host is stopping
inline constexpr const char* bad_response = "bad_response";    // a malformed response body

// Tensors a worker returned, or is about to be sent (output_tensors.hpp).
inline constexpr const char* invalid_output = "invalid_output";
inline constexpr const char* invalid_input = "invalid_input";

// Start-up (host_memory.hpp, plugin_probe.hpp, preflight.hpp).
inline constexpr const char* bad_slot = "bad_slot";
inline constexpr const char* not_found = "not_found";
inline constexpr const char* probe_failed = "probe_failed";

// Bringing a deployment up (host_startup.hpp).
inline constexpr const char* invalid_deployment = "invalid_deployment";  // diagnostics say why
// A ComfyUI tree description (orch_host_start's comfyui) that is not JSON or has a bad field.
inline constexpr const char* invalid_description = "invalid_description";
inline constexpr const char* memory_unreadable = "memory_unreadable";    // /proc/meminfo, cgroup

// A call that waits for a worker's answer, made on the io thread (from an event callback),
// which is the thread that would deliver it.
inline constexpr const char* wrong_thread = "wrong_thread";
// An eviction meant for a worker generation that was replaced: its models went with it.
inline constexpr const char* stale_generation = "stale_generation";

// A pack's web side (docs/comfyui.md): a worker's web socket that could not be made
// (worker_web_sockets.hpp), a worker's message for the clients that is malformed
// (ui_messages.hpp).
inline constexpr const char* web_socket = "web_socket";
inline constexpr const char* bad_ui_message = "bad_ui_message";

}  // namespace orch::runtime::runtime_errc
