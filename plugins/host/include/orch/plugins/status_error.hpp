// The one pair of conversions between a plugin's orch_status and the host's orch::error
// (docs/errors.md). Code on either side of the ABI seam converts here and compares named codes
// (plugin_errc), never status names or message text: a pager's ORCH_OOM_RETRYABLE once became the
// string "OOM_RETRYABLE" on the way up and ORCH_DEVICE_ERROR on the way back down, so a node that
// should have streamed its weight failed.
#pragma once

#include <string>

#include "orch/plugin/plugin.h"
#include "orch/support/result.hpp"

namespace orch::plugins {

// The error for a status other than ORCH_OK: the code names the status (plugin_errc), the message
// is `what` followed by the status's name, e.g. "region_create answered OOM_RETRYABLE".
error status_error(orch_status status, const std::string& what);

// The status a node or a plugin caller answers for `err`: the inverse of status_error() for its
// codes, ORCH_DEVICE_ERROR for every other error (a host-side failure the ABI has no name for).
orch_status error_status(const error& err) noexcept;

}  // namespace orch::plugins
