// The worker's error codes (docs/errors.md). A failure that is a plugin's status uses the plugin
// host's codes (orch/plugins/errc.hpp) through status_error(), so node_context can hand the same
// status back to the node.
#pragma once

namespace orch::worker::worker_errc {

// Loading a node pack (node_library.hpp).
inline constexpr const char* load_failed = "load_failed";
inline constexpr const char* not_a_pack = "not_a_pack";
inline constexpr const char* abi_mismatch = "abi_mismatch";
inline constexpr const char* invalid_pack = "invalid_pack";
// A Python pack whose import raised (the worker's caller says why: orch_worker_options).
inline constexpr const char* pack_import_failed = "pack_import_failed";

// The handshake and the memory plugins (worker_memory.hpp).
inline constexpr const char* not_ready = "not_ready";  // a request before the handshake ended
inline constexpr const char* bad_handshake = "bad_handshake";
inline constexpr const char* invalid_plugin = "invalid_plugin";
inline constexpr const char* not_found = "not_found";
inline constexpr const char* pager_open_failed = "pager_open_failed";
inline constexpr const char* ledger_open_failed = "ledger_open_failed";
inline constexpr const char* allocator_open_failed = "allocator_open_failed";
inline constexpr const char* budget_exceeded = "budget_exceeded";  // no pinned grant

// A node's input value (node_values.hpp).
inline constexpr const char* bad_value = "bad_value";
// What a class method (VALIDATE_INPUTS, IS_CHANGED) may not do: allocate output tensors.
inline constexpr const char* not_in_class_method = "not_in_class_method";

}  // namespace orch::worker::worker_errc
