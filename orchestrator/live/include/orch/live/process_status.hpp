// process_status: the live status document of a running host (docs/cli.md, "status"): one entry
// per process, the host and each worker, with the mode, the memory manager and why, the plugins
// at their protocol level and the settings the adapter dropped, the device and its free-memory
// view, the pager and pinned figures against the one budget and the cgroup's RAM view, the cast
// buffers against their bound, and epoch, calls, generation, restarts and state. Built from the
// memory table (the control segment) and what each worker said in its ready message; nothing is
// asked of a worker, so reading it costs no round trip.
#pragma once

#include <nlohmann/json.hpp>

#include "orch/runtime/host_runtime.hpp"

namespace orch::live {

// Call on the io thread (host_runtime::on_io_thread).
nlohmann::json read_process_status(runtime::host_runtime& host);

// "streams=2;pinned=1;level=4" (plugins::applied_settings_text) as {"streams": "2", ...}; text
// that is not of that shape gives the fields that are.
nlohmann::json settings_fields(const std::string& text);

}  // namespace orch::live
