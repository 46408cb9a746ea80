#include "host_link.hpp"

#include <cstdio>
#include <ctime>

namespace orch::plugin_detail {

uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void host_link::attach(const orch_host_services* host) noexcept {
  std::lock_guard lock(mutex_);
  services_ = {};
  attached_ = false;
  if (host == nullptr) return;
  // Only the fields the host's struct holds: an older host passes a shorter one, and what it
  // lacks stays NULL (the fallbacks).
  if (ORCH_HAS_FIELD(host, ctx)) services_.ctx = host->ctx;
  if (ORCH_HAS_FIELD(host, log)) services_.log = host->log;
  if (ORCH_HAS_FIELD(host, now_ns)) services_.now_ns = host->now_ns;
  if (ORCH_HAS_FIELD(host, report_release)) services_.report_release = host->report_release;
  services_.struct_size = sizeof services_;
  attached_ = true;
}

void host_link::detach() noexcept {
  std::lock_guard lock(mutex_);
  services_ = {};
  attached_ = false;
  redirect_ = nullptr;
  redirect_ctx_ = nullptr;
}

void host_link::log(int32_t level, const char* format, ...) const noexcept {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  std::lock_guard lock(mutex_);
  if (redirect_ != nullptr) {
    redirect_(redirect_ctx_, level, buffer);
    return;
  }
  if (attached_ && services_.log != nullptr) services_.log(services_.ctx, level, name_, buffer);
}

void host_link::redirect(redirect_fn fn, void* ctx) noexcept {
  std::lock_guard lock(mutex_);
  redirect_ = fn;
  redirect_ctx_ = ctx;
}

uint64_t host_link::now_ns() const noexcept {
  std::lock_guard lock(mutex_);
  if (attached_ && services_.now_ns != nullptr) return services_.now_ns(services_.ctx);
  return monotonic_ns();
}

void host_link::clock_source(uint64_t (**fn)(void*), void** ctx) const noexcept {
  std::lock_guard lock(mutex_);
  const bool lent = attached_ && services_.now_ns != nullptr;
  *fn = lent ? services_.now_ns : nullptr;
  *ctx = lent ? services_.ctx : nullptr;
}

void host_link::report_release(uint32_t reason, int32_t device, uint64_t bytes) const noexcept {
  std::lock_guard lock(mutex_);
  if (!attached_ || services_.report_release == nullptr) return;
  orch_release_report report{};
  report.struct_size = sizeof report;
  report.reason = reason;
  report.device = device;
  report.bytes = bytes;
  services_.report_release(services_.ctx, &report);
}

orch_status lifecycle::begin_init() noexcept {
  int expected = 0;
  if (state_.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return ORCH_OK;
  return ORCH_ALREADY_INITIALISED;
}

void lifecycle::finish_init(bool succeeded) noexcept {
  state_.store(succeeded ? 2 : 0, std::memory_order_release);
}

bool lifecycle::begin_shutdown() noexcept {
  int expected = 2;
  return state_.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

}  // namespace orch::plugin_detail
