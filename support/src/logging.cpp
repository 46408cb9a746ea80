#include "orch/support/logging.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "orch/support/untrusted_text.hpp"

namespace orch {
namespace {

// %* : the message, with control characters escaped (untrusted_text.hpp). Log lines carry text
// from node packs (a node's log() and fail() messages, class names): an ANSI escape in one must
// not reach the terminal, nor a newline forge another line.
class printable_payload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (is_printable(text)) {
      dest.append(text.data(), text.data() + text.size());
    } else {
      const std::string safe = printable(text);
      dest.append(safe.data(), safe.data() + safe.size());
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<printable_payload>();
  }
};

}  // namespace

void init_logging(std::string_view program_name) {
  const std::string name(program_name);
  spdlog::drop(name);  // makes a second call replace the logger instead of throwing
  auto logger = spdlog::stderr_color_mt(name);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<printable_payload>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + name +
                                                          "] [%^%l%$] %*");
  logger->set_formatter(std::move(formatter));
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
