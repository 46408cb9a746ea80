// Stable names for the ABI's enumerations, used in logs, the CLI table and JSON.
#pragma once

#include <string>
#include <vector>

#include "orch/plugin/plugin.h"

namespace orch::plugins {

const char* status_name(orch_status status) noexcept;   // "OK", "OOM_RETRYABLE", ...
const char* kind_name(orch_plugin_kind kind) noexcept;  // "pager", "allocator", "backend"
const char* backend_name(orch_backend_kind backend) noexcept;  // "cpu", "sim", "cuda", "hip"
std::vector<std::string> capability_names(uint64_t capabilities);  // known bits, then "bit<N>"

}  // namespace orch::plugins
