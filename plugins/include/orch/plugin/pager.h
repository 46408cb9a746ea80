/* The pager plugin (aimdo model: docs/references.md, aimdo §4 and §6.3; docs/plugin-abi.md).
 *
 * A region reserves address space; fault() maps the missing pages of a range, pins them and
 * returns per-page signatures; unpin() releases the pins. Eviction lowers a per-region watermark
 * from the top, lowest-priority region first. A fault ending above the watermark fails fast with
 * ORCH_OOM_RETRYABLE and the caller streams that weight instead.
 *
 * Locking: every call takes the device's pager lock, except reclaim() with
 * ORCH_RECLAIM_TRY_LOCK, which never waits for it (an allocation path must not block behind a
 * model thread, docs/memory-semantics.md) and answers ORCH_BUSY with *freed = 0 if it is held
 * (ORCH_OOM_RETRYABLE before ABI 1.1).
 * Sync: calls that free pages synchronise the device before and after freeing (aimdo's double
 * sync); the fault hit path and unpin below the watermark never synchronise. */
#ifndef ORCH_PLUGIN_PAGER_H
#define ORCH_PLUGIN_PAGER_H

#include "orch/plugin/levels.h"
#include "orch/plugin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orch_pager orch_pager;   /* one per device; owned by the plugin */
typedef struct orch_region orch_region; /* owned by its pager */

#define ORCH_PRESSURE_DEFAULT 0u /* the backend's mem_get_info */
#define ORCH_PRESSURE_NONE 1u    /* simple term only (the polled term is ignored) */

#define ORCH_RECLAIM_TRY_LOCK 1u
/* `bytes` is a request size: evict budget_deficit(bytes) instead (allocator path, aimdo §4.7). */
#define ORCH_RECLAIM_DEFICIT 2u

/* Residency flags (region_residency). */
#define ORCH_PAGE_RESIDENT 1u
#define ORCH_PAGE_PINNED 2u

typedef struct orch_pager_config_v1 {
  uint32_t struct_size;
  uint32_t level;    /* protocol level the caller speaks (levels.h) */
  int32_t ordinal;   /* device index */
  int32_t sim_fd;    /* sim only (orch_device_config.sim_fd), else -1 */
  uint64_t page_size;        /* 0: 32 MiB (aimdo's VBAR page); rounded up to the granularity */
  uint64_t extra_headroom;   /* L3+: per device, fixed; added to both deficit terms */
  uint64_t budget_cap;       /* 0: none; else the process may hold at most this many bytes */
  int64_t poll_interval_ms;  /* <0: 2000 ms; 0: poll on every check */
  int64_t poll_floor;        /* <0: 256 MiB (aimdo's VRAM_HEADROOM) */
  uint32_t pressure_source;  /* L4+: ORCH_PRESSURE_*; 0 below L4 */
  uint32_t reserved0;
} orch_pager_config_v1;
typedef orch_pager_config_v1 orch_pager_config;

typedef struct orch_region_info_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t base;         /* reserved virtual address */
  uint64_t page_size;
  uint64_t nr_pages;     /* after the capacity clamp */
  uint64_t watermark;    /* pages; faults ending above it fail fast */
  uint64_t watermark_limit; /* pages; eviction floor */
  uint64_t resident_pages;
  uint64_t pinned_pages;
} orch_region_info_v1;
typedef orch_region_info_v1 orch_region_info;

typedef struct orch_pager_usage_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t capacity;       /* device total, or the budget cap when smaller */
  uint64_t page_bytes;     /* resident region pages */
  uint64_t external_bytes; /* accounted by account_external (cast buffers, torch allocations) */
  uint64_t last_polled_free;
} orch_pager_usage_v1;
typedef orch_pager_usage_v1 orch_pager_usage;

typedef struct orch_pager_stats_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t faults;       /* fault calls */
  uint64_t hits;         /* pages found resident */
  uint64_t misses;       /* pages mapped */
  uint64_t oom_returns;  /* faults answered ORCH_OOM_RETRYABLE */
  uint64_t evictions;    /* pages freed by eviction (including at unpin) */
  uint64_t polls;        /* pressure polls that reached the backend */
  uint64_t reclaims;     /* reclaim calls */
  uint64_t errors;       /* faults answered ORCH_DEVICE_ERROR */
} orch_pager_stats_v1;
typedef orch_pager_stats_v1 orch_pager_stats;

typedef void (*orch_pager_log_fn)(void* ctx, int32_t level, const char* message);

typedef struct orch_pager_api_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Device lifecycle. ORCH_NOT_INITIALISED before init. */
  orch_status (*device_open)(const orch_pager_config_v1* config, orch_pager** pager);
  void (*device_close)(orch_pager* pager); /* frees every region, even pinned pages */

  /* Budget knobs. */
  orch_status (*set_simple_headroom)(uint64_t bytes); /* L3+, process-wide, default 256 MiB */
  orch_status (*get_simple_headroom)(uint64_t* bytes); /* L3+ */
  orch_status (*set_budget_cap)(orch_pager* pager, uint64_t bytes); /* 0 removes the cap */
  orch_status (*set_pressure_source)(orch_pager* pager, uint32_t source); /* L4+ */
  orch_status (*set_log_callback)(orch_pager_log_fn fn, void* ctx);       /* L4+ */

  /* Regions. create clamps to floor(capacity / page) pages; *clamped_bytes reports the result.
   * The new region is the highest priority. */
  orch_status (*region_create)(orch_pager* pager, uint64_t bytes, orch_region** region,
                               uint64_t* clamped_bytes);
  void (*region_destroy)(orch_region* region); /* NULL-safe; frees pinned pages too */
  orch_status (*region_info)(orch_region* region, orch_region_info_v1* info);
  orch_status (*region_prioritize)(orch_region* region);   /* to the top; watermark = nr_pages */
  orch_status (*region_deprioritize)(orch_region* region); /* to the bottom; watermark = nr_pages */

  /* Maps the missing pages of [offset, offset+size) and pins every page of it. sig receives one
   * serial per page (sig_cap entries at most; *sig_len the count): a serial changes whenever a
   * page was (re)created, i.e. its contents were lost. *newly_mapped may be NULL.
   * ORCH_OOM_RETRYABLE: nothing pinned (pages mapped earlier in the call stay resident, unpinned,
   * as in aimdo). ORCH_DEVICE_ERROR: a backend failure; state stays consistent. */
  orch_status (*region_fault)(orch_region* region, uint64_t offset, uint64_t size, uint64_t* sig,
                              size_t sig_cap, size_t* sig_len, uint64_t* newly_mapped);
  /* Drops one pin of each page; a page left unpinned at or above the watermark is freed. */
  orch_status (*region_unpin)(orch_region* region, uint64_t offset, uint64_t size);

  /* Watermark family (aimdo §4.5). Bytes are rounded up to pages. */
  orch_status (*region_set_watermark)(orch_region* region, uint64_t bytes);
  orch_status (*region_set_watermark_limit)(orch_region* region, uint64_t bytes);
  orch_status (*reset_watermark_limits)(orch_pager* pager);

  /* Eviction. region_evict frees from the region's top, respecting limit and pins. reclaim walks
   * regions from the lowest priority. Both report the bytes actually freed. */
  orch_status (*region_evict)(orch_region* region, uint64_t bytes, uint64_t* freed);
  orch_status (*reclaim)(orch_pager* pager, uint64_t bytes, uint32_t flags, uint64_t* freed);

  /* Queries. */
  orch_status (*region_residency)(orch_region* region, uint8_t* flags, size_t cap, size_t* len);
  orch_status (*region_resident_bytes)(orch_region* region, uint64_t* bytes);
  orch_status (*resident_bytes)(orch_pager* pager, uint64_t* bytes);
  orch_status (*pinned_bytes)(orch_pager* pager, uint64_t* bytes);
  /* Signed: positive means "evict this many bytes first". Polls when the interval has passed. */
  orch_status (*budget_deficit)(orch_pager* pager, uint64_t request, int64_t* deficit);
  orch_status (*poll)(orch_pager* pager); /* forces a pressure poll */
  /* Memory the pager does not own but must budget (cast buffers, torch allocations). */
  orch_status (*account_external)(orch_pager* pager, int64_t delta_bytes);
  orch_status (*usage)(orch_pager* pager, orch_pager_usage_v1* usage);
  orch_status (*stats)(orch_pager* pager, orch_pager_stats_v1* stats);
  /* The backend this pager drives, for plugins built on it (the allocator); borrowed. */
  const struct orch_backend_api_v1* (*backend)(orch_pager* pager);
  struct orch_device* (*device)(orch_pager* pager);
} orch_pager_api_v1;
typedef orch_pager_api_v1 orch_pager_api;

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_PAGER_H */
