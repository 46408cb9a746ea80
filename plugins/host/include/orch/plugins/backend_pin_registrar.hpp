// backend_pin_registrar: pool segments registered with the process's device through its backend
// plugin's host_register / host_unregister (cuMemHostRegister / hipHostRegister on GPUs, counted
// on sim, accepted on cpu). This is what makes a shared pool segment page-locked for DMA in every
// process that maps it (docs/shared-memory.md; docs/references.md, anchors §8.2.6).
//
// It lives with the plugins' host library, over ipc's pin_registrar interface: plugins use ipc,
// ipc knows nothing of plugins. The device must outlive every range registered through it:
// owners declare it before the segment table or pool that uses this registrar, so the segments
// unregister first.
#pragma once

#include <string>

#include "orch/ipc/pin_registrar.hpp"
#include "orch/plugin/backend.h"

namespace orch::plugins {

class backend_pin_registrar final : public ipc::pin_registrar {
 public:
  // `backend` names it in messages ("cuda"). A table whose host_register is NULL cannot
  // page-lock: ranges are then accepted without a call, as on cpu.
  backend_pin_registrar(const orch_backend_api& api, orch_device* device, std::string backend);
  // "pin_failed" with the plugin's status named, e.g. on cuda when the range cannot be locked.
  status register_range(void* addr, std::uint64_t size) override;
  void unregister_range(void* addr, std::uint64_t size) noexcept override;
  std::string_view name() const noexcept override { return name_; }

 private:
  const orch_backend_api& api_;
  orch_device* device_;
  std::string name_;
};

}  // namespace orch::plugins
