// The simulated GPU's device vtable (docs/sim-device.md): the orch_backend_api a
// pager or a backend plugin drives, exactly as it drives cuda or hip.
//
// Device state that every attached process shares (capacity, usage, faults, the clock) is read
// and written through the segment (sim_segment.hpp); handles, mappings and the optional backing
// store are process-local (sim_device.hpp). The backing store is poisoned when a physical
// allocation is released so tests can prove a changed page signature means lost contents. The
// test controls (orch_sim_api) are in sim_controls.cpp.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

#include "../common/host_link.hpp"
#include "backends.hpp"
#include "sim_device.hpp"

namespace orch::plugin_detail {
namespace {

orch_status sim_device_count(int32_t* count) {
  if (count == nullptr) return ORCH_INVALID;
  *count = 1;  // a segment is one device; which one is named by the fd at open
  return ORCH_OK;
}

orch_status sim_device_open(const orch_device_config* config, orch_device** out) {
  if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, reserved0) ||
      config->sim_fd < 0)
    return ORCH_INVALID;
  sim::attachment a;
  if (const orch_status s = sim::attach(config->sim_fd, &a); s != ORCH_OK) return s;
  auto* dev = new (std::nothrow) orch_device;
  if (dev == nullptr) {
    sim::detach(a);
    return ORCH_HOST_OOM;
  }
  static_cast<sim::attachment&>(*dev) = a;
  *out = dev;
  return ORCH_OK;
}

void release_phys_locked(orch_device* dev, std::map<uint64_t, orch_device::phys>::iterator it) {
  if (it->second.backing != nullptr) {
    std::memset(it->second.backing, ORCH_SIM_POISON, it->second.size);
    std::free(it->second.backing);
  }
  dev->seg->used.fetch_sub(it->second.size);
  dev->seg->slots[dev->slot].used.fetch_sub(it->second.size);
  dev->seg->releases.fetch_add(1);
  dev->handles.erase(it);
}

void sim_device_close(orch_device* dev) {
  if (dev == nullptr) return;
  {
    std::lock_guard lock(dev->mutex);
    // A closing process gives back what it still holds: the device must not leak its usage.
    while (!dev->handles.empty()) release_phys_locked(dev, dev->handles.begin());
    dev->maps.clear();
    dev->registered.clear();  // a closed device's registrations end with it, as on CUDA
  }
  sim::detach(*dev);
  delete dev;
}

orch_status sim_total_mem(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->capacity;
  return ORCH_OK;
}

orch_status sim_granularity(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->granularity;
  return ORCH_OK;
}

orch_status sim_mem_get_info(orch_device* dev, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (dev == nullptr || free_bytes == nullptr) return ORCH_INVALID;
  sim_segment* seg = dev->seg;
  if (sim::take_fault(seg, ORCH_SIM_FAULT_POLL)) return ORCH_DEVICE_ERROR;
  seg->polls.fetch_add(1);
  uint64_t free = 0;
  uint64_t total = dev->capacity;
  if (dev->free_mode == ORCH_SIM_FREE_PROCESS) {
    // WDDM: the answer is about the caller's own budget; other processes are invisible.
    total = sim::process_budget(seg, dev->capacity);
    const uint64_t mine = sim::process_used(seg);
    free = mine < total ? total - mine : 0;
  } else {
    // Subtractions only: used + other can wrap when "other" is set near UINT64_MAX.
    const uint64_t used = seg->used.load();
    const uint64_t other = seg->other.load();
    free = used < total ? total - used : 0;
    free = other < free ? free - other : 0;
  }
  *free_bytes = free;
  if (total_bytes != nullptr) *total_bytes = total;
  return ORCH_OK;
}

orch_status sim_va_reserve(orch_device* dev, uint64_t size, uint64_t* va) {
  if (dev == nullptr || va == nullptr || size == 0) return ORCH_INVALID;
  if (sim::take_fault(dev->seg, ORCH_SIM_FAULT_VA)) return ORCH_DEVICE_ERROR;
  if (sim::take_fault(dev->seg, ORCH_SIM_FAULT_VA_OOM)) return ORCH_OOM_RETRYABLE;
  const uint64_t g = dev->granularity;
  if (size > UINT64_MAX - 2 * g) return ORCH_INVALID;  // rounding and the guard would wrap
  const uint64_t rounded = (size + g - 1) / g * g;
  // Leave one granule of guard between reservations so off-by-one mappings cannot alias.
  *va = dev->seg->next_va.fetch_add(rounded + g);
  return ORCH_OK;
}

orch_status sim_va_free(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr || size == 0 || va == 0) return ORCH_INVALID;
  return ORCH_OK;  // addresses are never reused, so there is nothing to give back
}

orch_status sim_phys_create_unguarded(orch_device* dev, uint64_t size, uint64_t* handle) {
  if (dev == nullptr || handle == nullptr || size == 0 || size % dev->granularity != 0)
    return ORCH_INVALID;
  sim_segment* seg = dev->seg;
  if (sim::take_fault(seg, ORCH_SIM_FAULT_CREATE_OOM)) return ORCH_OOM_RETRYABLE;
  if (sim::take_fault(seg, ORCH_SIM_FAULT_DEVICE_ERROR)) return ORCH_DEVICE_ERROR;
  // Larger than the device: refuse before the backing store asks the host for that much.
  if (size > dev->capacity) return ORCH_OOM_RETRYABLE;
  unsigned char* backing = nullptr;
  if (dev->backing_store) {
    backing = static_cast<unsigned char*>(std::malloc(size));
    if (backing == nullptr) return ORCH_OOM_RETRYABLE;
    std::memset(backing, ORCH_SIM_POISON, size);  // fresh memory holds garbage
  }
  // Reserve capacity with a CAS: processes compete for one device without a shared lock.
  uint64_t used = seg->used.load();
  for (;;) {
    // Does used + other + size exceed capacity? Written with subtractions so that no sum can
    // wrap, whatever "other" or a corrupted total says.
    const uint64_t other = seg->other.load();
    if (used > dev->capacity || other > dev->capacity - used ||
        size > dev->capacity - used - other) {
      std::free(backing);
      return ORCH_OOM_RETRYABLE;
    }
    if (seg->used.compare_exchange_weak(used, used + size)) break;
  }
  // Charged to the slot at once: a process killed from here on leaves its slot's usage equal to
  // what it added to the device, which is what a reclaimer subtracts.
  seg->slots[dev->slot].used.fetch_add(size);
  std::lock_guard lock(dev->mutex);
  const uint64_t h = dev->next_handle++;
  try {
    dev->handles.emplace(h, orch_device::phys{size, backing, 0});
  } catch (...) {
    seg->slots[dev->slot].used.fetch_sub(size);
    seg->used.fetch_sub(size);
    std::free(backing);
    throw;
  }
  seg->creates.fetch_add(1);
  *handle = h;
  return ORCH_OK;
}

orch_status sim_phys_create(orch_device* dev, uint64_t size, uint64_t* handle) {
  return guarded([&] { return sim_phys_create_unguarded(dev, size, handle); });
}

orch_status sim_phys_release(orch_device* dev, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->handles.find(handle);
  if (it == dev->handles.end() || it->second.mappings != 0) return ORCH_INVALID;
  release_phys_locked(dev, it);
  return ORCH_OK;
}

orch_status sim_map_unguarded(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  if (dev == nullptr || size == 0) return ORCH_INVALID;
  if (sim::take_fault(dev->seg, ORCH_SIM_FAULT_MAP)) return ORCH_DEVICE_ERROR;
  std::lock_guard lock(dev->mutex);
  auto it = dev->handles.find(handle);
  if (it == dev->handles.end() || it->second.size != size || dev->maps.count(va) != 0)
    return ORCH_INVALID;
  dev->maps.emplace(va, orch_device::mapping{size, handle});
  ++it->second.mappings;
  dev->seg->maps.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_map(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  return guarded([&] { return sim_map_unguarded(dev, va, size, handle); });
}

orch_status sim_unmap(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.find(va);
  if (it == dev->maps.end() || it->second.size != size) return ORCH_INVALID;
  if (auto ph = dev->handles.find(it->second.handle); ph != dev->handles.end())
    --ph->second.mappings;
  dev->maps.erase(it);
  dev->seg->unmaps.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_synchronize(orch_device* dev) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->syncs.fetch_add(1);
  return ORCH_OK;
}

// Registration costs nothing on sim but is counted, and misused as the driver refuses it: a
// range that overlaps one already registered, or unregistering a start that was never
// registered, answers ORCH_INVALID (cuMemHostRegister's ALREADY_REGISTERED / NOT_REGISTERED).
orch_status sim_host_register(orch_device* dev, void* ptr, uint64_t size) {
  if (dev == nullptr || ptr == nullptr || size == 0) return ORCH_INVALID;
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (size > UINTPTR_MAX - start) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto next = dev->registered.lower_bound(ptr);
  if (next != dev->registered.end() && reinterpret_cast<uintptr_t>(next->first) < start + size)
    return ORCH_INVALID;
  if (next != dev->registered.begin()) {
    const auto prev = std::prev(next);
    if (reinterpret_cast<uintptr_t>(prev->first) + prev->second > start) return ORCH_INVALID;
  }
  dev->registered.emplace(ptr, size);
  dev->seg->slots[dev->slot].registered.fetch_add(size);
  dev->seg->host_registrations.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_host_unregister(orch_device* dev, void* ptr) {
  if (dev == nullptr || ptr == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->registered.find(ptr);
  if (it == dev->registered.end()) return ORCH_INVALID;
  dev->seg->slots[dev->slot].registered.fetch_sub(it->second);
  dev->seg->host_unregistrations.fetch_add(1);
  dev->registered.erase(it);
  return ORCH_OK;
}

uint64_t sim_now_ns(orch_device* dev) {
  if (dev != nullptr && dev->seg->clock_frozen.load(std::memory_order_acquire) != 0)
    return dev->seg->clock_ns.load();
  return monotonic_ns();
}

orch_status sim_runtime_version(orch_device* dev, uint32_t* major, uint32_t* minor) {
  if (major == nullptr || minor == nullptr) return ORCH_INVALID;
  *major = dev->runtime_version >> 16;
  *minor = dev->runtime_version & 0xFFFFu;
  return ORCH_OK;
}

void* sim_host_pointer(orch_device* dev, uint64_t va) {
  if (dev == nullptr) return nullptr;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.upper_bound(va);
  if (it == dev->maps.begin()) return nullptr;
  --it;
  if (va >= it->first + it->second.size) return nullptr;
  auto ph = dev->handles.find(it->second.handle);
  if (ph == dev->handles.end() || ph->second.backing == nullptr) return nullptr;
  return ph->second.backing + (va - it->first);
}

constexpr orch_backend_api sim_api{.struct_size = sizeof(orch_backend_api),
                                   .reserved0 = 0,
                                   .device_count = sim_device_count,
                                   .device_open = sim_device_open,
                                   .device_close = sim_device_close,
                                   .device_total_mem = sim_total_mem,
                                   .granularity = sim_granularity,
                                   .mem_get_info = sim_mem_get_info,
                                   .va_reserve = sim_va_reserve,
                                   .va_free = sim_va_free,
                                   .phys_create = sim_phys_create,
                                   .phys_release = sim_phys_release,
                                   .map = sim_map,
                                   .unmap = sim_unmap,
                                   .synchronize = sim_synchronize,
                                   .host_register = sim_host_register,
                                   .host_unregister = sim_host_unregister,
                                   .now_ns = sim_now_ns,
                                   .host_pointer = sim_host_pointer,
                                   .runtime_version = sim_runtime_version};

}  // namespace

const orch_backend_api* sim_backend_api() noexcept { return &sim_api; }

}  // namespace orch::plugin_detail
