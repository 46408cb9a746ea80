/* The allocator plugin: cast buffers (one per offload stream) and the torch pluggable-allocator
 * exports (docs/plugin-abi.md; docs/references.md, aimdo §4.7 and §6.4, seed "Carry").
 *
 * Cast buffers are grow-only arenas (aimdo's VRAMBuffer): each reserves address space once and
 * commits it in chunks, reclaiming through the pager before every growth. reset_cast_buffers
 * releases them all (the node boundary, docs/memory-semantics.md). */
#ifndef ORCH_PLUGIN_ALLOCATOR_H
#define ORCH_PLUGIN_ALLOCATOR_H

#include <sys/types.h>

#include "orch/plugin/pager.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orch_allocator orch_allocator; /* owned by the plugin */

#define ORCH_ALLOC_STREAMS_DEFAULT 0xFFFFFFFFu /* 2 on cuda/hip/sim, 0 on cpu */

typedef struct orch_allocator_config_v1 {
  uint32_t struct_size;
  uint32_t level;         /* protocol level (levels.h) */
  int32_t ordinal;        /* device index; the torch exports find the allocator by it */
  uint32_t streams;       /* ORCH_ALLOC_STREAMS_DEFAULT or an explicit count */
  uint64_t chunk_size;    /* 0: 16 MiB (aimdo's VRAMBuffer chunk; 2 MiB on ROCm Linux) */
  uint64_t reserve_size;  /* VA reserved per cast buffer; 0: 16 GiB (ComfyUI's reservation) */
  uint64_t replace_threshold; /* 0: 50 MB; a larger buffer being replaced is released at once */
  /* The pager to reclaim through and whose backend/device supply memory. Borrowed; must outlive
   * the allocator. Required on cuda/hip/sim, ignored on cpu. */
  const struct orch_pager_api_v1* pager_api;
  orch_pager* pager;
  /* Appended: without a pager (ledger worker, docs/memory-semantics.md), memory comes straight from
   * this backend device and nothing is reclaimed before growth. Borrowed; ignored when pager is
   * set. A caller whose struct_size ends before these fields must pass a pager. */
  const struct orch_backend_api_v1* backend_api;
  struct orch_device* device;
} orch_allocator_config_v1;
typedef orch_allocator_config_v1 orch_allocator_config;

typedef struct orch_cast_stats_v1 {
  uint32_t struct_size;
  uint32_t streams;
  uint64_t committed;  /* bytes held by every cast buffer now */
  uint64_t high_water; /* largest `committed` seen since open */
  uint64_t grows;      /* chunk commits */
  uint64_t resets;
  uint64_t replaced;   /* buffers replaced by a larger reservation */
  uint64_t retired;    /* bytes of replaced buffers waiting for the next reset */
  uint64_t torch_bytes; /* bytes held by orch_torch_malloc */
  /* The largest one buffer has committed since open: streams x this bounds `high_water` while
   * buffers are reused rather than ratcheted. Absent (0) from plugins built before it. */
  uint64_t largest_buffer;
} orch_cast_stats_v1;
typedef orch_cast_stats_v1 orch_cast_stats;

typedef struct orch_allocator_api_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  orch_status (*open)(const orch_allocator_config_v1* config, orch_allocator** allocator);
  void (*close)(orch_allocator* allocator); /* releases everything */
  /* A buffer of at least `size` bytes for `stream` (< streams). On a backend with no offload
   * stream (cpu, streams == 0) every call gets a fresh per-call host buffer, valid until the next
   * call or reset. *address: the device address (sim/cpu: host-visible when backed). Growth
   * answers ORCH_OOM_RETRYABLE when the device stays full after reclaim. */
  orch_status (*cast_buffer)(orch_allocator* allocator, uint32_t stream, uint64_t size,
                             uint64_t* address);
  orch_status (*reset_cast_buffers)(orch_allocator* allocator);
  orch_status (*cast_stats)(orch_allocator* allocator, orch_cast_stats_v1* stats);
} orch_allocator_api_v1;
typedef orch_allocator_api_v1 orch_allocator_api;

/* Exported by allocator plugins, shaped for torch.cuda.memory.CUDAPluggableAllocator. They serve
 * the allocator opened for `device` and never refuse for budget reasons: they reclaim through the
 * pager, then allocate (aimdo never refuses torch, aimdo §4.7). NULL when the device is full
 * after reclaim or no allocator is open for `device`. */
typedef void* (*orch_torch_malloc_fn)(ssize_t size, int device, void* stream);
typedef void (*orch_torch_free_fn)(void* ptr, ssize_t size, int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_ALLOCATOR_H */
