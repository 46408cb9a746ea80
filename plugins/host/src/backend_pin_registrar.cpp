#include "orch/plugins/backend_pin_registrar.hpp"

#include "orch/ipc/errc.hpp"

#include <spdlog/spdlog.h>

namespace orch::plugins {

backend_pin_registrar::backend_pin_registrar(const orch_backend_api& api, orch_device* device,
                                             std::string backend)
    : api_(api), device_(device), name_(std::move(backend)) {
  if (api_.host_register == nullptr) {
    spdlog::warn("the {} backend cannot page-lock host memory (no host_register): pool segments "
                 "stay pageable",
                 name_);
  }
}

status backend_pin_registrar::register_range(void* addr, std::uint64_t size) {
  if (api_.host_register == nullptr) return ok_status();
  const orch_status st = api_.host_register(device_, addr, size);
  if (st == ORCH_OK) return ok_status();
  return error{ipc::shm_errc::pin_failed, "registering " + std::to_string(size) +
                                         " host bytes with the " + name_ + " backend answered " +
                                         orch_status_name(st) +
                                         "; disable it with [memory] disable_pinned_memory = true"};
}

void backend_pin_registrar::unregister_range(void* addr, std::uint64_t size) noexcept {
  if (api_.host_unregister == nullptr) return;
  const orch_status st = api_.host_unregister(device_, addr);
  if (st != ORCH_OK) {
    spdlog::warn("unregistering {} host bytes from the {} backend answered {}", size, name_,
                 orch_status_name(st));
  }
}

}  // namespace orch::plugins
