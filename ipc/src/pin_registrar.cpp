#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/errc.hpp"

#include <sys/mman.h>

#include <spdlog/spdlog.h>

namespace orch::ipc {

status counting_pin_registrar::register_range(void* addr, std::uint64_t size) {
  if (!ranges_.emplace(addr, size).second) {
    ++misuses_;
    return error{shm_errc::pin_failed, "range is already registered"};
  }
  registered_bytes_ += size;
  ++registrations_;
  return ok_status();
}

void counting_pin_registrar::unregister_range(void* addr, std::uint64_t size) noexcept {
  auto it = ranges_.find(addr);
  // msync fails with ENOMEM on an unmapped range: that catches unregister-after-munmap.
  const bool mapped = ::msync(addr, static_cast<std::size_t>(size), MS_ASYNC) == 0;
  if (it == ranges_.end() || it->second != size || !mapped) {
    ++misuses_;
    spdlog::warn("pin_registrar: unregistering a range that was not registered ({} bytes)", size);
    return;
  }
  registered_bytes_ -= size;
  ++unregistrations_;
  ranges_.erase(it);
}

}  // namespace orch::ipc
