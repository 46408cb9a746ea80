// Logging set-up shared by the executables: one spdlog logger on stderr whose level comes from
// ORCH_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default info).
#pragma once

#include <string_view>

namespace orch {

// Configures the default spdlog logger. Safe to call more than once. An unknown ORCH_LOG_LEVEL
// value is reported once on stderr and the default level is kept.
void init_logging(std::string_view program_name);

}  // namespace orch
