// The plugin side of the host services (docs/plugin-abi.md): a copy of what the host lent at init,
// used for logs, the clock and release reports. Plugins link neither spdlog nor Boost, so this is
// the only way a plugin speaks to the outside world.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <new>

#include "orch/plugin/plugin.h"

namespace orch::plugin_detail {

class host_link {
 public:
  explicit host_link(const char* plugin_name) noexcept : name_(plugin_name) {}

  // Copies the services; host may be NULL (everything then falls back to defaults).
  void attach(const orch_host_services* host) noexcept;
  void detach() noexcept;

  void log(int32_t level, const char* format, ...) const noexcept
      __attribute__((format(printf, 3, 4)));
  uint64_t now_ns() const noexcept;  // host clock, else CLOCK_MONOTONIC
  // The host clock itself (fn NULL when none was lent), for a caller that must read the time
  // without this object's lock (the pager's hit path). Valid until detach().
  void clock_source(uint64_t (**fn)(void*), void** ctx) const noexcept;
  void report_release(uint32_t reason, int32_t device, uint64_t bytes) const noexcept;
  const char* name() const noexcept { return name_; }
  // L4's log callback (pager set_log_callback): when set, logs go there instead of the host sink.
  using redirect_fn = void (*)(void* ctx, int32_t level, const char* message);
  void redirect(redirect_fn fn, void* ctx) noexcept;

 private:
  const char* name_;
  mutable std::mutex mutex_;  // guards services_ against a concurrent shutdown
  orch_host_services services_{};
  bool attached_ = false;
  redirect_fn redirect_ = nullptr;
  void* redirect_ctx_ = nullptr;
};

uint64_t monotonic_ns() noexcept;

// Idempotent init/shutdown bookkeeping shared by every plugin (docs/references.md, aimdo §6.1:
// "a second init returns ALREADY_INITIALISED and disturbs nothing").
class lifecycle {
 public:
  // Returns ORCH_ALREADY_INITIALISED when already up; runs nothing then.
  orch_status begin_init() noexcept;
  void finish_init(bool succeeded) noexcept;
  // True exactly once per successful init: the caller then tears down.
  bool begin_shutdown() noexcept;
  bool up() const noexcept { return state_.load(std::memory_order_acquire) == 2; }

 private:
  std::atomic<int> state_{0};  // 0 down, 1 initialising, 2 up
};

}  // namespace orch::plugin_detail

namespace orch::plugin_detail {

// No exception crosses the C ABI (docs/errors.md): entry points that may allocate run their
// body through this, so std::bad_alloc becomes ORCH_HOST_OOM and anything else
// ORCH_DEVICE_ERROR instead of unwinding into C.
template <typename F>
orch_status guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ORCH_HOST_OOM;
  } catch (...) {
    return ORCH_DEVICE_ERROR;
  }
}

}  // namespace orch::plugin_detail
