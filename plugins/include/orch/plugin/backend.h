/* The backend vtable: the driver primitives the pager and allocator policies use
 * (docs/references.md, aimdo §6.2: aimdo's g_cuda seam). One implementation per backend: cpu,
 * sim, cuda, hip. Policy never calls a driver directly. */
#ifndef ORCH_PLUGIN_BACKEND_H
#define ORCH_PLUGIN_BACKEND_H

#include "orch/plugin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One attached device. Owned by the backend; released by device_close. */
typedef struct orch_device orch_device;

typedef struct orch_device_config_v1 {
  uint32_t struct_size;
  int32_t ordinal; /* device index (cuda/hip); 0 for cpu and sim */
  int32_t sim_fd;  /* sim only: fd of the device segment (orch_sim_api.create); the backend dups
                      it, the caller keeps ownership of its own fd. -1 elsewhere. */
  uint32_t reserved0;
} orch_device_config_v1;
typedef orch_device_config_v1 orch_device_config;

/* Every function returns ORCH_OK or a status; none may device-synchronise unless it says so.
 * Virtual addresses are plain integers: on sim and cpu they need not be dereferenceable. */
typedef struct orch_backend_api_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Number of usable devices; 0 (and ORCH_OK) when the driver is present but has none;
   * ORCH_DEVICE_ERROR when the driver cannot be loaded. */
  orch_status (*device_count)(int32_t* count);
  orch_status (*device_open)(const orch_device_config_v1* config, orch_device** device);
  void (*device_close)(orch_device* device); /* NULL-safe; releases what the device still maps */
  orch_status (*device_total_mem)(orch_device* device, uint64_t* bytes);
  orch_status (*granularity)(orch_device* device, uint64_t* bytes); /* mapping unit */
  /* The polled pressure source (cuMemGetInfo). On sim it honours the free-memory mode. */
  orch_status (*mem_get_info)(orch_device* device, uint64_t* free_bytes, uint64_t* total_bytes);
  orch_status (*va_reserve)(orch_device* device, uint64_t size, uint64_t* va);
  orch_status (*va_free)(orch_device* device, uint64_t va, uint64_t size);
  /* Physical memory. ORCH_OOM_RETRYABLE is the distinct "out of memory" answer. */
  orch_status (*phys_create)(orch_device* device, uint64_t size, uint64_t* handle);
  orch_status (*phys_release)(orch_device* device, uint64_t handle);
  /* map = cuMemMap + cuMemSetAccess fused; unmap = cuMemUnmap. */
  orch_status (*map)(orch_device* device, uint64_t va, uint64_t size, uint64_t handle);
  orch_status (*unmap)(orch_device* device, uint64_t va, uint64_t size);
  orch_status (*synchronize)(orch_device* device); /* device-wide; the only call that syncs */
  orch_status (*host_register)(orch_device* device, void* ptr, uint64_t size);
  orch_status (*host_unregister)(orch_device* device, void* ptr);
  /* Optional (NULL: the host clock). sim answers its injectable clock. */
  uint64_t (*now_ns)(orch_device* device);
  /* Optional: a host-visible view of mapped memory at va, or NULL (sim's backing store). */
  void* (*host_pointer)(orch_device* device, uint64_t va);
  /* Appended; optional (NULL, or a struct_size that stops before it: the backend has no
   * versioned runtime, as cpu). The device runtime's version, compared with a deployment's
   * [memory.runtime_floor]: cuda the driver's (cuDriverGetVersion), hip the runtime's, sim the
   * one its segment was created with. */
  orch_status (*runtime_version)(orch_device* device, uint32_t* major, uint32_t* minor);
} orch_backend_api_v1;
typedef orch_backend_api_v1 orch_backend_api;

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_BACKEND_H */
