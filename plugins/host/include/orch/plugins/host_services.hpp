// The host services the orchestrator lends plugins (docs/plugin-abi.md): logs into spdlog, the
// steady clock, and release reports counted per reason.
#pragma once

#include "orch/plugin/plugin.h"

namespace orch::plugins {

// Static services: log -> spdlog ("plugin <name>: <message>"), now_ns -> steady_clock,
// report_release -> a debug log line. Valid for the whole process.
const orch_host_services* default_host_services() noexcept;

}  // namespace orch::plugins
