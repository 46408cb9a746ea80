// The node ABI's log levels (ORCH_LOG_LEVEL_* in nodes.h) as spdlog's: node code's log() and a
// Python pack's print and logging (orch_worker_log) map them the same way.
#pragma once

#include <cstdint>

#include <spdlog/spdlog.h>

#include "orch/worker/nodes.h"

namespace orch::worker {

inline spdlog::level::level_enum spdlog_level(std::int32_t level) noexcept {
  return level >= ORCH_LOG_LEVEL_ERROR  ? spdlog::level::err
         : level == ORCH_LOG_LEVEL_WARN ? spdlog::level::warn
         : level == ORCH_LOG_LEVEL_INFO ? spdlog::level::info
                                        : spdlog::level::debug;
}

}  // namespace orch::worker
