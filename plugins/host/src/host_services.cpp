#include "orch/plugins/host_services.hpp"

#include <spdlog/spdlog.h>

#include <ctime>

#include "orch/plugins/names.hpp"

namespace orch::plugins {
namespace {

void log_sink(void* /*ctx*/, int32_t level, const char* plugin, const char* message) {
  const auto lvl = static_cast<spdlog::level::level_enum>(
      level < ORCH_LOG_TRACE ? ORCH_LOG_TRACE : (level > ORCH_LOG_ERROR ? ORCH_LOG_ERROR : level));
  spdlog::log(lvl, "plugin {}: {}", plugin != nullptr ? plugin : "?",
              message != nullptr ? message : "");
}

// CLOCK_MONOTONIC_COARSE: the one reader of this clock is the pager's poll throttle (a pressure
// poll at most every 2 s, docs/plugin-abi.md), which a tick's resolution (1 to 4 ms) does not
// move, and the pager's hit path reads it on every fault. The precise clock (std::chrono's
// steady_clock, CLOCK_MONOTONIC) costs about 25 ns a read on the build VM, as much as the rest
// of the hit together; the coarse one about 6 ns, a load of the kernel's last tick (vDSO)
// (bench/plugins/pager-vs-aimdo; docs/performance.md, "The hit path against comfy-aimdo").
uint64_t steady_ns(void* /*ctx*/) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
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
