#include "orch/ipc/backend_pin_registrar.hpp"

#include <spdlog/spdlog.h>

#include "orch/plugins/names.hpp"

namespace orch::ipc {

backend_pin_registrar::backend_pin_registrar(plugins::backend_device& device)
    : device_(device), name_(device.backend()) {}

status backend_pin_registrar::register_range(void* addr, std::uint64_t size) {
  const orch_status st = device_.api().host_register(device_.device(), addr, size);
  if (st == ORCH_OK) return ok_status();
  return error{"pin_failed", "registering " + std::to_string(size) + " host bytes with the " +
                                 name_ + " backend answered " + plugins::status_name(st) +
                                 "; disable it with [memory] disable_pinned_memory = true"};
}

void backend_pin_registrar::unregister_range(void* addr, std::uint64_t size) noexcept {
  const orch_status st = device_.api().host_unregister(device_.device(), addr);
  if (st != ORCH_OK) {
    spdlog::warn("unregistering {} host bytes from the {} backend answered {}", size, name_,
                 plugins::status_name(st));
  }
}

}  // namespace orch::ipc
