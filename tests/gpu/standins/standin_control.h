/* The control surface of the driver stand-ins (docs/gpu.md, "The driver stand-ins"): what a test
 * calls, through dlopen of the same file the backend loaded, to inject faults and read what the
 * driver saw. Both stand-ins (cuda's, hip's) export these with their own prefix. */
#ifndef ORCH_TESTS_GPU_STANDIN_CONTROL_H
#define ORCH_TESTS_GPU_STANDIN_CONTROL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the stand-in saw. `unsafe_frees` counts unmaps and releases of mapped memory made after a
 * failed synchronisation and before a successful one: memory the device may still have been
 * reading (the driver would not stop it; a real card would corrupt or fault). */
typedef struct orch_standin_stats {
  uint64_t created_bytes;   /* physical allocations alive, on every device */
  uint64_t mapped_bytes;    /* mapped ranges alive */
  uint64_t reservations;    /* address reservations alive */
  uint64_t registered;      /* host ranges registered */
  uint64_t syncs;           /* synchronisations that succeeded, on every device */
  uint64_t failed_syncs;    /* synchronisations that failed */
  uint64_t unsafe_frees;
  uint64_t creates;         /* cuMemCreate / hipMemCreate calls that succeeded */
  uint64_t releases;        /* cuMemRelease / hipMemRelease calls that succeeded */
} orch_standin_stats;

/* One device's memory as the driver answers for it: its size, what this process created on it,
 * and what "other processes" hold there. */
typedef struct orch_standin_memory {
  uint64_t total_bytes;
  uint64_t created_bytes;
  uint64_t other_bytes;
} orch_standin_memory;

/* A `count` that never runs down: the fault holds until cleared with 0. */
#define ORCH_STANDIN_ALWAYS (-1)

/* The next `count` calls of `entry` (its base name: "cuCtxSynchronize", "cuMemCreate",
 * "cuMemGetInfo", "hipDeviceSynchronize", ...) answer `status` (a CUresult or hipError_t) and do
 * nothing; ORCH_STANDIN_ALWAYS, every call until cleared; 0 clears. */
typedef void (*orch_standin_fail_fn)(const char* entry, int status, int count);
/* Usage by other processes on `device`, as the sim device's set_other_usage: it lowers the free
 * memory cuMemGetInfo / hipMemGetInfo answer and what cuMemCreate / hipMemCreate can still take.
 * 0 on success, -1 for a device the driver does not have. */
typedef int (*orch_standin_set_other_usage_fn)(int device, uint64_t bytes);
/* Resizes `device` to `bytes` (0: back to the size the environment chose), for a scenario that
 * needs a device of its own size; -1 for a device the driver does not have or one on which this
 * process already holds more than `bytes`. */
typedef int (*orch_standin_set_memory_fn)(int device, uint64_t bytes);
/* One device's memory; -1 for a device the driver does not have. */
typedef int (*orch_standin_memory_fn)(int device, orch_standin_memory* out);
/* The device falls off the bus: from now on every call that touches it answers the lost-device
 * status (cuda: CUDA_ERROR_DEVICE_UNAVAILABLE; hip: hipErrorNoDevice). */
typedef void (*orch_standin_lose_device_fn)(void);
typedef void (*orch_standin_stats_fn)(orch_standin_stats* out);
/* The cudaVersion the backend last asked for `entry` through cuGetProcAddress; -1 if never. */
typedef int (*orch_standin_requested_version_fn)(const char* entry);

#ifdef __cplusplus
}
#endif

#endif
