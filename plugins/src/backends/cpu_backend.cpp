// The cpu backend: no device. "Physical" memory is host memory, pinning is a no-op and nothing
// ever synchronises (docs/plugin-abi.md). It exists so a CPU worker runs the same code paths; the
// ledger, not the pager, manages its weights (seed "Two eras": a CPU load device takes the
// legacy path).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "../common/host_link.hpp"
#include "backends.hpp"

struct orch_device {
  std::mutex mutex;
  std::map<uint64_t, std::pair<uint64_t, void*>> handles;  // handle -> (size, memory)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> maps;  // va -> (size, handle)
  uint64_t next_handle = 1;
  uint64_t next_va = 0x100000000000ull;
};

namespace orch::plugin_detail {
namespace {

constexpr uint64_t cpu_granularity = 4096;

uint64_t host_pages(int name) {
  const long pages = sysconf(name);
  const long size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

orch_status cpu_device_count(int32_t* count) {
  if (count == nullptr) return ORCH_INVALID;
  *count = 1;
  return ORCH_OK;
}

orch_status cpu_device_open(const orch_device_config* config, orch_device** out) {
  if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, reserved0) ||
      config->ordinal != 0)
    return ORCH_INVALID;
  auto* dev = new (std::nothrow) orch_device;
  if (dev == nullptr) return ORCH_HOST_OOM;
  *out = dev;
  return ORCH_OK;
}

void cpu_device_close(orch_device* dev) {
  if (dev == nullptr) return;
  for (auto& [h, entry] : dev->handles) std::free(entry.second);
  delete dev;
}

orch_status cpu_total_mem(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = host_pages(_SC_PHYS_PAGES);
  return ORCH_OK;
}

orch_status cpu_granularity_of(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = cpu_granularity;
  return ORCH_OK;
}

orch_status cpu_mem_get_info(orch_device* dev, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (dev == nullptr || free_bytes == nullptr) return ORCH_INVALID;
  *free_bytes = host_pages(_SC_AVPHYS_PAGES);
  if (total_bytes != nullptr) *total_bytes = host_pages(_SC_PHYS_PAGES);
  return ORCH_OK;
}

orch_status cpu_va_reserve(orch_device* dev, uint64_t size, uint64_t* va) {
  if (dev == nullptr || va == nullptr || size == 0) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  *va = dev->next_va;
  dev->next_va += (size + cpu_granularity - 1) / cpu_granularity * cpu_granularity + cpu_granularity;
  return ORCH_OK;
}

orch_status cpu_va_free(orch_device* dev, uint64_t va, uint64_t size) {
  return dev == nullptr || va == 0 || size == 0 ? ORCH_INVALID : ORCH_OK;
}

orch_status cpu_phys_create(orch_device* dev, uint64_t size, uint64_t* handle) {
  if (dev == nullptr || handle == nullptr || size == 0 || size % cpu_granularity != 0)
    return ORCH_INVALID;
  void* p = std::aligned_alloc(cpu_granularity, size);
  if (p == nullptr) return ORCH_OOM_RETRYABLE;
  return guarded([&] {
    std::lock_guard lock(dev->mutex);
    try {
      dev->handles.emplace(dev->next_handle, std::make_pair(size, p));
    } catch (...) {
      std::free(p);
      throw;
    }
    *handle = dev->next_handle++;
    return ORCH_OK;
  });
}

orch_status cpu_phys_release(orch_device* dev, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->handles.find(handle);
  if (it == dev->handles.end()) return ORCH_INVALID;
  for (const auto& [va, m] : dev->maps)  // a few cast-buffer chunks at most on cpu
    if (m.second == handle) return ORCH_INVALID;
  std::free(it->second.second);
  dev->handles.erase(it);
  return ORCH_OK;
}

orch_status cpu_map(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  if (dev == nullptr || size == 0) return ORCH_INVALID;
  return guarded([&] {
    std::lock_guard lock(dev->mutex);
    auto it = dev->handles.find(handle);
    if (it == dev->handles.end() || it->second.first != size || dev->maps.count(va) != 0)
      return ORCH_INVALID;
    dev->maps.emplace(va, std::make_pair(size, handle));
    return ORCH_OK;
  });
}

orch_status cpu_unmap(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.find(va);
  if (it == dev->maps.end() || it->second.first != size) return ORCH_INVALID;
  dev->maps.erase(it);
  return ORCH_OK;
}

orch_status cpu_synchronize(orch_device* dev) { return dev == nullptr ? ORCH_INVALID : ORCH_OK; }

// Pinning is a no-op on cpu: there is no DMA engine to page-lock for.
orch_status cpu_host_register(orch_device* dev, void* ptr, uint64_t size) {
  return dev == nullptr || ptr == nullptr || size == 0 ? ORCH_INVALID : ORCH_OK;
}

orch_status cpu_host_unregister(orch_device* dev, void* ptr) {
  return dev == nullptr || ptr == nullptr ? ORCH_INVALID : ORCH_OK;
}

void* cpu_host_pointer(orch_device* dev, uint64_t va) {
  if (dev == nullptr) return nullptr;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.upper_bound(va);
  if (it == dev->maps.begin()) return nullptr;
  --it;
  if (va >= it->first + it->second.first) return nullptr;
  auto h = dev->handles.find(it->second.second);
  if (h == dev->handles.end()) return nullptr;
  return static_cast<unsigned char*>(h->second.second) + (va - it->first);
}

constexpr orch_backend_api cpu_api{.struct_size = sizeof(orch_backend_api),
                                   .reserved0 = 0,
                                   .device_count = cpu_device_count,
                                   .device_open = cpu_device_open,
                                   .device_close = cpu_device_close,
                                   .device_total_mem = cpu_total_mem,
                                   .granularity = cpu_granularity_of,
                                   .mem_get_info = cpu_mem_get_info,
                                   .va_reserve = cpu_va_reserve,
                                   .va_free = cpu_va_free,
                                   .phys_create = cpu_phys_create,
                                   .phys_release = cpu_phys_release,
                                   .map = cpu_map,
                                   .unmap = cpu_unmap,
                                   .synchronize = cpu_synchronize,
                                   .host_register = cpu_host_register,
                                   .host_unregister = cpu_host_unregister,
                                   .now_ns = nullptr,
                                   .host_pointer = cpu_host_pointer,
                                   .runtime_version = nullptr /* no runtime to version */};

}  // namespace

const orch_backend_api* cpu_backend_api() noexcept { return &cpu_api; }

}  // namespace orch::plugin_detail
