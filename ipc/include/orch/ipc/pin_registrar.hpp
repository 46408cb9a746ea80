// pin_registrar: how a process registers a mapped pool segment with its device backend
// (cudaHostRegister / hipHostRegister on GPUs, counted on sim, none on cpu; docs/shared-memory.md;
// docs/references.md, anchors §8.2.6). Each process registers a segment once after mapping
// it and unregisters it before unmapping (NCCL shmutils order): unmapping registered memory
// first leaves the driver holding a dangling range.
//
// Processes register through the backend plugin (plugins/host's backend_pin_registrar.hpp). The no-op and
// counting registrars below serve pinning turned off ([memory] disable_pinned_memory) and the
// ipc unit tests that prove once-per-mapping and unregister-before-unmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>

#include "orch/support/result.hpp"

namespace orch::ipc {

class pin_registrar {
 public:
  virtual ~pin_registrar() = default;
  // Registers [addr, addr + size). Errors are backend specific ("pin_failed" for the built-ins).
  virtual status register_range(void* addr, std::uint64_t size) = 0;
  // Unregisters a range registered before. Never fails: a backend error is logged.
  virtual void unregister_range(void* addr, std::uint64_t size) noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
};

// Pinning turned off: the segment is shared but not page-locked.
class noop_pin_registrar final : public pin_registrar {
 public:
  status register_range(void*, std::uint64_t) override { return ok_status(); }
  void unregister_range(void*, std::uint64_t) noexcept override {}
  std::string_view name() const noexcept override { return "none"; }
};

// sim and tests: registration is free but counted, and misuse (double registration, unregistering
// an unknown range, or one that is no longer mapped) is recorded instead of ignored, so tests can
// prove once-per-mapping and unregister-before-unmap.
class counting_pin_registrar final : public pin_registrar {
 public:
  status register_range(void* addr, std::uint64_t size) override;
  void unregister_range(void* addr, std::uint64_t size) noexcept override;
  std::string_view name() const noexcept override { return "counting"; }

  std::uint64_t registered_bytes() const noexcept { return registered_bytes_; }
  std::uint64_t registrations() const noexcept { return registrations_; }
  std::uint64_t unregistrations() const noexcept { return unregistrations_; }
  std::uint64_t misuses() const noexcept { return misuses_; }

 private:
  std::map<const void*, std::uint64_t> ranges_;
  std::uint64_t registered_bytes_ = 0;
  std::uint64_t registrations_ = 0;
  std::uint64_t unregistrations_ = 0;
  std::uint64_t misuses_ = 0;
};

}  // namespace orch::ipc
