// The backend vtable over a GPU driver's virtual memory API (docs/plugin-abi.md, "Backends"):
// one implementation for the cuda and hip backends, which mirror each other call for call
// (docs/references.md, aimdo §6.2). Memory: reserve/create/map + set-access, the VMM calls aimdo's
// VBAR uses (§4.2); pressure: mem_get_info; pinning: host_register.
//
// A traits struct names the driver (cuda_backend.cpp, hip_backend.cpp):
//
//   result, success, out_of_memory, invalid_value, not_supported
//       the driver's status type and the codes that map to ours (any other: ORCH_DEVICE_ERROR);
//   driver_table, driver()
//       the driver's entry points, resolved once at run time; `ok` when all were found and the
//       driver initialised. Common names: device_count, device_total_mem, mem_get_info,
//       address_reserve, address_free, mem_create, mem_release, mem_map, mem_unmap,
//       mem_set_access, granularity, synchronize, host_register, host_unregister;
//   device_state, open(driver, ordinal, state), close(driver, state)
//       what a device keeps besides its ordinal (cuda: the primary context it retains);
//   scope(driver, ordinal, state)
//       makes the device current for one call and restores the caller's on every way out
//       (plugins get explicit handles, never a thread-local current device, aimdo §6.1);
//   va, to_va, from_va, handle, to_handle, from_handle
//       the driver's address and allocation handle types, as the ABI's uint64_t;
//   allocation_prop(ordinal), access_desc(ordinal), granularity_recommended;
//   total_mem(driver, ordinal, state, size_t*);
//   runtime_version(driver, major, minor)  the version a [memory.runtime_floor] is checked against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "orch/plugin/backend.h"

namespace orch::plugin_detail {

template <typename T>
class vmm_backend {
 public:
  static const orch_backend_api* api() noexcept { return &table; }

 private:
  // What an orch_device handle points to (struct orch_device is never instantiated).
  struct device {
    int32_t ordinal = 0;
    uint64_t granularity = 0;
    typename T::device_state state{};
  };
  static device* as(orch_device* d) { return reinterpret_cast<device*>(d); }

  static orch_status map_error(typename T::result rc) {
    if (rc == T::success) return ORCH_OK;
    if (rc == T::out_of_memory) return ORCH_OOM_RETRYABLE;
    if (rc == T::invalid_value) return ORCH_INVALID;
    if (rc == T::not_supported) return ORCH_UNSUPPORTED;
    return ORCH_DEVICE_ERROR;
  }

  // Runs call(driver) with the device current; one that cannot be made current is a device error.
  template <typename F>
  static orch_status in_scope(const device* dev, F&& call) {
    const auto& d = T::driver();
    const typename T::scope scope(d, dev->ordinal, dev->state);
    if (!scope) return ORCH_DEVICE_ERROR;
    return call(d);
  }

  static orch_status device_count(int32_t* count) {
    if (count == nullptr) return ORCH_INVALID;
    const auto& d = T::driver();
    if (!d.ok) return ORCH_DEVICE_ERROR;
    int n = 0;
    if (const orch_status st = map_error(d.device_count(&n)); st != ORCH_OK) return st;
    *count = n;
    return ORCH_OK;
  }

  static orch_status device_open(const orch_device_config* config, orch_device** out) {
    if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, reserved0))
      return ORCH_INVALID;
    const auto& d = T::driver();
    if (!d.ok) return ORCH_DEVICE_ERROR;
    auto* dev = new (std::nothrow) device;
    if (dev == nullptr) return ORCH_HOST_OOM;
    dev->ordinal = config->ordinal;
    if (const orch_status st = map_error(T::open(d, dev->ordinal, dev->state)); st != ORCH_OK) {
      delete dev;
      return st;
    }
    size_t g = 0;
    const auto prop = T::allocation_prop(dev->ordinal);
    const orch_status st = in_scope(dev, [&](const auto& drv) {
      return map_error(drv.granularity(&g, &prop, T::granularity_recommended));
    });
    if (st != ORCH_OK) {
      T::close(d, dev->state);
      delete dev;
      return st;
    }
    dev->granularity = g;
    *out = reinterpret_cast<orch_device*>(dev);
    return ORCH_OK;
  }

  static void device_close(orch_device* handle) {
    if (handle == nullptr) return;
    T::close(T::driver(), as(handle)->state);
    delete as(handle);
  }

  static orch_status total_mem(orch_device* handle, uint64_t* bytes) {
    if (handle == nullptr || bytes == nullptr) return ORCH_INVALID;
    const device* dev = as(handle);
    size_t n = 0;
    const orch_status st = map_error(T::total_mem(T::driver(), dev->ordinal, dev->state, &n));
    *bytes = n;
    return st;
  }

  static orch_status granularity(orch_device* handle, uint64_t* bytes) {
    if (handle == nullptr || bytes == nullptr) return ORCH_INVALID;
    *bytes = as(handle)->granularity;
    return ORCH_OK;
  }

  static orch_status mem_get_info(orch_device* handle, uint64_t* free_bytes,
                                  uint64_t* total_bytes) {
    if (free_bytes == nullptr || handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle), [&](const auto& d) {
      size_t f = 0;
      size_t t = 0;
      const orch_status st = map_error(d.mem_get_info(&f, &t));
      *free_bytes = f;
      if (total_bytes != nullptr) *total_bytes = t;
      return st;
    });
  }

  static orch_status va_reserve(orch_device* handle, uint64_t size, uint64_t* va) {
    if (va == nullptr || size == 0 || handle == nullptr) return ORCH_INVALID;
    const device* dev = as(handle);
    return in_scope(dev, [&](const auto& d) {
      typename T::va p{};
      const orch_status st =
          map_error(d.address_reserve(&p, size, dev->granularity, typename T::va{}, 0));
      *va = T::from_va(p);
      return st;
    });
  }

  static orch_status va_free(orch_device* handle, uint64_t va, uint64_t size) {
    if (handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle),
                    [&](const auto& d) { return map_error(d.address_free(T::to_va(va), size)); });
  }

  static orch_status phys_create(orch_device* handle, uint64_t size, uint64_t* out) {
    if (out == nullptr || size == 0 || handle == nullptr) return ORCH_INVALID;
    const device* dev = as(handle);
    return in_scope(dev, [&](const auto& d) {
      const auto prop = T::allocation_prop(dev->ordinal);
      typename T::handle h{};
      const orch_status st = map_error(d.mem_create(&h, size, &prop, 0));
      *out = T::from_handle(h);
      return st;
    });
  }

  static orch_status phys_release(orch_device* handle, uint64_t h) {
    if (handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle),
                    [&](const auto& d) { return map_error(d.mem_release(T::to_handle(h))); });
  }

  static orch_status map(orch_device* handle, uint64_t va, uint64_t size, uint64_t h) {
    if (handle == nullptr) return ORCH_INVALID;
    const device* dev = as(handle);
    return in_scope(dev, [&](const auto& d) {
      if (const orch_status st = map_error(d.mem_map(T::to_va(va), size, 0, T::to_handle(h), 0));
          st != ORCH_OK)
        return st;
      const auto access = T::access_desc(dev->ordinal);
      // Setting access is where "device not ready" surfaces (aimdo §4.11); undo the map so
      // the caller's state stays consistent.
      const orch_status st = map_error(d.mem_set_access(T::to_va(va), size, &access, 1));
      if (st != ORCH_OK) (void)d.mem_unmap(T::to_va(va), size);
      return st;
    });
  }

  static orch_status unmap(orch_device* handle, uint64_t va, uint64_t size) {
    if (handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle),
                    [&](const auto& d) { return map_error(d.mem_unmap(T::to_va(va), size)); });
  }

  static orch_status synchronize(orch_device* handle) {
    if (handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle), [](const auto& d) { return map_error(d.synchronize()); });
  }

  static orch_status host_register(orch_device* handle, void* ptr, uint64_t size) {
    if (ptr == nullptr || size == 0 || handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle),
                    [&](const auto& d) { return map_error(d.host_register(ptr, size, 0)); });
  }

  static orch_status host_unregister(orch_device* handle, void* ptr) {
    if (ptr == nullptr || handle == nullptr) return ORCH_INVALID;
    return in_scope(as(handle), [&](const auto& d) { return map_error(d.host_unregister(ptr)); });
  }

  static orch_status runtime_version(orch_device* handle, uint32_t* major, uint32_t* minor) {
    if (handle == nullptr || major == nullptr || minor == nullptr) return ORCH_INVALID;
    int v = 0;
    if (const orch_status st = map_error(T::runtime_version(T::driver(), &v)); st != ORCH_OK)
      return st;
    if (v < 0) return ORCH_DEVICE_ERROR;
    T::decode_version(v, major, minor);
    return ORCH_OK;
  }

  static constexpr orch_backend_api table{.struct_size = sizeof(orch_backend_api),
                                          .reserved0 = 0,
                                          .device_count = device_count,
                                          .device_open = device_open,
                                          .device_close = device_close,
                                          .device_total_mem = total_mem,
                                          .granularity = granularity,
                                          .mem_get_info = mem_get_info,
                                          .va_reserve = va_reserve,
                                          .va_free = va_free,
                                          .phys_create = phys_create,
                                          .phys_release = phys_release,
                                          .map = map,
                                          .unmap = unmap,
                                          .synchronize = synchronize,
                                          .host_register = host_register,
                                          .host_unregister = host_unregister,
                                          .now_ns = nullptr,
                                          .host_pointer = nullptr,
                                          .runtime_version = runtime_version};
};

}  // namespace orch::plugin_detail
