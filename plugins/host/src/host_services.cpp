#include "orch/plugins/host_services.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "orch/plugins/names.hpp"

namespace orch::plugins {
namespace {

void log_sink(void* /*ctx*/, int32_t level, const char* plugin, const char* message) {
  const auto lvl = static_cast<spdlog::level::level_enum>(
      level < ORCH_LOG_TRACE ? ORCH_LOG_TRACE : (level > ORCH_LOG_ERROR ? ORCH_LOG_ERROR : level));
  spdlog::log(lvl, "plugin {}: {}", plugin != nullptr ? plugin : "?",
              message != nullptr ? message : "");
}

uint64_t steady_ns(void* /*ctx*/) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void release_sink(void* /*ctx*/, const orch_release_report* report) {
  // A plugin built against an older struct sends a shorter one: nothing is read past it.
  if (report == nullptr || !ORCH_HAS_FIELD(report, bytes)) return;
  spdlog::debug("plugin release: device={} reason={} bytes={}", report->device, report->reason,
                report->bytes);
}

const orch_host_services services{.struct_size = sizeof(orch_host_services),
                                  .reserved0 = 0,
                                  .ctx = nullptr,
                                  .log = log_sink,
                                  .now_ns = steady_ns,
                                  .report_release = release_sink};

}  // namespace

const orch_host_services* default_host_services() noexcept { return &services; }

}  // namespace orch::plugins
