#include "orch/support/logging.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace orch {

void init_logging(std::string_view program_name) {
  const std::string name(program_name);
  spdlog::drop(name);  // makes a second call replace the logger instead of throwing
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + std::string(program_name) + "] [%^%l%$] %v");
  logger->set_level(spdlog::level::info);
  if (const char* env = std::getenv("ORCH_LOG_LEVEL"); env != nullptr && *env != '\0') {
    const auto level = spdlog::level::from_str(env);
    // from_str maps anything unknown to "off"; only accept "off" when it was asked for.
    if (level == spdlog::level::off && std::string(env) != "off") {
      logger->warn(
          "ORCH_LOG_LEVEL={} is not a level (trace, debug, info, warn, error, "
          "critical, off); using info",
          env);
    } else {
      logger->set_level(level);
    }
  }
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace orch
