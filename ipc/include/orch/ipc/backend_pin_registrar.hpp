// backend_pin_registrar: pool segments registered with the process's device through its backend
// plugin's host_register / host_unregister (cuMemHostRegister / hipHostRegister on GPUs, counted
// on sim, accepted on cpu). This is what makes a shared pool segment page-locked for DMA in every
// process that maps it (DESIGN.md §4.2; reference/architecture-anchors.md §8.2.6).
//
// The device must outlive every range registered through it: owners declare it before the
// segment table or pool that uses this registrar, so the segments unregister first.
#pragma once

#include <string>

#include "orch/ipc/pin_registrar.hpp"
#include "orch/plugins/backend_device.hpp"

namespace orch::ipc {

class backend_pin_registrar final : public pin_registrar {
 public:
  explicit backend_pin_registrar(plugins::backend_device& device);
  // "pin_failed" with the plugin's status named, e.g. on cuda when the range cannot be locked.
  status register_range(void* addr, std::uint64_t size) override;
  void unregister_range(void* addr, std::uint64_t size) noexcept override;
  std::string_view name() const noexcept override { return name_; }

 private:
  plugins::backend_device& device_;
  std::string name_;
};

}  // namespace orch::ipc
