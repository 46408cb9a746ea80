// The plugin host's error codes: every orch::error this layer returns carries one of these
// (docs/errors.md). The first group names the orch_status a plugin answered; status_error.hpp
// converts between the two, and nothing else does.
#pragma once

namespace orch::plugins::plugin_errc {

// An orch_status, as the host's error code (status_error.hpp).
inline constexpr const char* out_of_memory = "out_of_memory";              // ORCH_OOM_RETRYABLE
inline constexpr const char* device_error = "device_error";                // ORCH_DEVICE_ERROR
inline constexpr const char* invalid_argument = "invalid_argument";        // ORCH_INVALID
inline constexpr const char* unsupported = "unsupported";                  // ORCH_UNSUPPORTED
inline constexpr const char* not_initialised = "not_initialised";          // ORCH_NOT_INITIALISED
inline constexpr const char* already_initialised = "already_initialised";  // ORCH_ALREADY_...
inline constexpr const char* busy = "busy";                                // ORCH_BUSY
inline constexpr const char* no_slot = "no_slot";                          // ORCH_NO_SLOT
inline constexpr const char* host_out_of_memory = "host_out_of_memory";    // ORCH_HOST_OOM
inline constexpr const char* unknown_status = "unknown_status";            // any other value

// Loading and checking a plugin.
inline constexpr const char* not_found = "not_found";          // no file at the path
inline constexpr const char* load_failed = "load_failed";      // dlopen refused it
inline constexpr const char* not_a_plugin = "not_a_plugin";    // no orch_plugin_query
inline constexpr const char* abi_mismatch = "abi_mismatch";    // another major, or no table
inline constexpr const char* invalid_table = "invalid_table";  // a table that breaks the ABI
// A well-formed table with a kind, backend or level this host does not know yet: skipped.
inline constexpr const char* unsupported_plugin = "unsupported_plugin";
inline constexpr const char* invalid_plugin = "invalid_plugin";    // not the kind asked for
inline constexpr const char* init_failed = "init_failed";          // init answered an error
inline constexpr const char* bad_plugin_list = "bad_plugin_list";  // a malformed probe listing
inline constexpr const char* device_open_failed = "device_open_failed";
inline constexpr const char* sim_failed = "sim_failed";  // creating the sim device failed

// A plugin directory's entry skipped by the registry without loading it.
inline constexpr const char* not_a_directory = "not_a_directory";
inline constexpr const char* not_plugin_name = "not_plugin_name";  // not orch-*.so / orch_*.so

}  // namespace orch::plugins::plugin_errc
