/* The simulated device's control extension (docs/sim-device.md).
 *
 * Reached through orch_plugin_table.extension of the sim backend plugin. The device state lives
 * in a memfd segment that create() sizes and seals: every process that receives the fd (by
 * inheritance or SCM_RIGHTS) and opens it with orch_device_config.sim_fd attaches to the same
 * device and competes for it. Nothing is ever created in /dev/shm. */
#ifndef ORCH_PLUGIN_SIM_H
#define ORCH_PLUGIN_SIM_H

#include "orch/plugin/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Free-memory mode: what mem_get_info reports as free. */
#define ORCH_SIM_FREE_DEVICE 0u  /* Linux: capacity minus every process's usage and "other" */
#define ORCH_SIM_FREE_PROCESS 1u /* WDDM: the caller's own budget minus its own usage */

/* Injectable faults. */
#define ORCH_SIM_FAULT_CREATE_OOM 1u   /* phys_create answers ORCH_OOM_RETRYABLE */
#define ORCH_SIM_FAULT_DEVICE_ERROR 2u /* phys_create answers ORCH_DEVICE_ERROR */
#define ORCH_SIM_FAULT_MAP 3u          /* map answers ORCH_DEVICE_ERROR ("device not ready") */
#define ORCH_SIM_FAULT_POLL 4u         /* mem_get_info answers ORCH_DEVICE_ERROR */
#define ORCH_SIM_FAULT_VA 5u           /* va_reserve answers ORCH_DEVICE_ERROR */
#define ORCH_SIM_FAULT_VA_OOM                                \
  6u /* va_reserve answers ORCH_OOM_RETRYABLE (address space \
        exhausted, as cuMemAddressReserve can) */

/* A count that never runs out. */
#define ORCH_SIM_FAULT_ALWAYS 0x40000000

/* The byte a backing store is filled with when its contents are lost. */
#define ORCH_SIM_POISON 0xA5u

typedef struct orch_sim_config_v1 {
  uint32_t struct_size;
  uint32_t free_mode;    /* ORCH_SIM_FREE_* */
  uint64_t capacity;     /* bytes */
  uint64_t granularity;  /* mapping unit, a power of two (default 2 MiB when 0) */
  uint32_t backing_store; /* non-zero: each physical allocation gets host memory, poisoned
                             when it is released (per process; never shared) */
  uint32_t runtime_version; /* what runtime_version answers, (major << 16) | minor; 0 (a caller
                               that left it reserved): 1.0 */
} orch_sim_config_v1;
typedef orch_sim_config_v1 orch_sim_config;

typedef struct orch_sim_counters_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t creates;  /* successful phys_create, device-wide */
  uint64_t releases; /* phys_release */
  uint64_t syncs;    /* synchronize */
  uint64_t polls;    /* mem_get_info calls that answered */
  uint64_t maps;
  uint64_t unmaps;
  uint64_t used_bytes;         /* physical bytes held by every attached process */
  uint64_t process_used_bytes; /* ... by the calling process */
  uint64_t other_bytes;        /* injected "other process" usage */
  /* Appended (a caller whose struct_size stops before here gets the fields above only). */
  uint64_t host_registrations;       /* successful host_register, device-wide */
  uint64_t host_unregistrations;     /* successful host_unregister, device-wide */
  uint64_t registered_bytes;         /* host bytes registered by every live attached process */
  uint64_t process_registered_bytes; /* ... by the calling process */
} orch_sim_counters_v1;
typedef orch_sim_counters_v1 orch_sim_counters;

typedef struct orch_sim_api_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Creates a device segment (memfd, size sealed). *fd is owned by the caller, who closes it;
   * the device lives as long as any fd or mapping of it. */
  orch_status (*create)(const orch_sim_config_v1* config, int32_t* fd);
  /* Usage by "another process": seen by mem_get_info in device mode, and by capacity. */
  orch_status (*set_other_usage)(orch_device* device, uint64_t bytes);
  /* The next `count` calls of the given kind fail (ORCH_SIM_FAULT_ALWAYS: until cleared with 0). */
  orch_status (*inject_fault)(orch_device* device, uint32_t fault, int32_t count);
  /* Freezes the device clock at now_ns (device-wide); advance_clock moves it forward. */
  orch_status (*set_clock)(orch_device* device, uint64_t now_ns);
  orch_status (*advance_clock)(orch_device* device, uint64_t delta_ns);
  /* The calling process's budget in process mode (default: capacity). */
  orch_status (*set_process_budget)(orch_device* device, uint64_t bytes);
  orch_status (*counters)(orch_device* device, orch_sim_counters_v1* out);
  /* Appended: gives back the slots of attached processes that died without closing (killed,
   * crashed; zombies count as dead). Their usage is subtracted exactly and their slots become
   * free. A slot is matched to its owner by pid and /proc start time, so a reused pid is not
   * mistaken for the owner. device_open does the same before claiming a slot. *bytes and *slots
   * (each may be NULL) receive what was given back. */
  orch_status (*reclaim_dead)(orch_device* device, uint64_t* bytes, uint32_t* slots);
} orch_sim_api_v1;
typedef orch_sim_api_v1 orch_sim_api;

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_SIM_H */
