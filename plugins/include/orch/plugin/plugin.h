/* The plugin entry point, host services and status codes (docs/plugin-abi.md).
 *
 * Pure C. Every struct starts with struct_size and fields are only ever appended, so an old
 * reader sees a prefix of a newer table (the NCCL/Triton rule); a reader checks a field
 * with ORCH_HAS_FIELD before it reads it. A NULL function or table pointer means "not supported".
 * No exception ever crosses this boundary.
 *
 * Every struct is named for the ABI major that defined it (orch_plugin_table_v1, NCCL's
 * ncclNet_v8_t), and today's name is a typedef of the newest: a plugin or host written against
 * `orch_plugin_table` gets the current major, and a host of a later major still declares the
 * _v1 structs it adapts old plugins from (docs/plugin-abi.md, "Versions"). */
#ifndef ORCH_PLUGIN_PLUGIN_H
#define ORCH_PLUGIN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_PLUGIN_ABI_MAJOR 1u
#define ORCH_PLUGIN_ABI_MINOR 1u

/* The one exported symbol every plugin provides. */
#define ORCH_PLUGIN_ENTRY_SYMBOL "orch_plugin_query"

/* Whether the struct at p (any struct of this ABI: it has a struct_size) is long enough to hold
 * `field`. A reader checks this before it reads any field appended after the struct's first
 * version, so a struct from an older caller or plugin, a shorter prefix, is read as far as it goes
 * and no further. p must not be NULL. */
#ifdef __cplusplus
#define ORCH_HAS_FIELD(p, field)                                                               \
  (static_cast<size_t>(reinterpret_cast<const char*>(&(p)->field) -                            \
                       reinterpret_cast<const char*>(p)) +                                     \
       sizeof((p)->field) <=                                                                   \
   (p)->struct_size)
#else
#define ORCH_HAS_FIELD(p, field)                                                               \
  ((size_t)((const char*)&(p)->field - (const char*)(p)) + sizeof((p)->field) <=               \
   (p)->struct_size)
#endif

#if defined(__GNUC__)
#define ORCH_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define ORCH_PLUGIN_EXPORT
#endif

/* Status codes. "Never" (UNSUPPORTED) is distinct from "not now" (OOM_RETRYABLE: the caller
 * frees memory and retries, or streams the weight instead, aimdo's return value 1;
 * docs/memory-semantics.md). OOM_RETRYABLE means only that device memory ran out: freeing helps.
 * Three other "not now" causes have their own codes (ABI 1.1), because freeing does not help them:
 * a try-lock that found the object held (BUSY), a bounded table with no free entry, such as the
 * sim device's process slots (NO_SLOT), and a failed host (CPU) allocation (HOST_OOM). A reader
 * built against 1.0 sees them as an unknown status, which it treats as an error. */
typedef int32_t orch_status;
#define ORCH_OK 0
#define ORCH_OOM_RETRYABLE 1
#define ORCH_DEVICE_ERROR 2
#define ORCH_INVALID 3
#define ORCH_UNSUPPORTED 4
#define ORCH_NOT_INITIALISED 5
#define ORCH_ALREADY_INITIALISED 6
#define ORCH_BUSY 7
#define ORCH_NO_SLOT 8
#define ORCH_HOST_OOM 9

/* A status's name for messages: "OK", "OOM_RETRYABLE", ...; "UNKNOWN_STATUS" for any other
 * value (a status comes from a plugin, so it is not trusted to be one of the above). */
static inline const char* orch_status_name(orch_status status) {
  switch (status) {
    case ORCH_OK: return "OK";
    case ORCH_OOM_RETRYABLE: return "OOM_RETRYABLE";
    case ORCH_DEVICE_ERROR: return "DEVICE_ERROR";
    case ORCH_INVALID: return "INVALID";
    case ORCH_UNSUPPORTED: return "UNSUPPORTED";
    case ORCH_NOT_INITIALISED: return "NOT_INITIALISED";
    case ORCH_ALREADY_INITIALISED: return "ALREADY_INITIALISED";
    case ORCH_BUSY:
      return "BUSY";
    case ORCH_NO_SLOT:
      return "NO_SLOT";
    case ORCH_HOST_OOM:
      return "HOST_OOM";
    default: return "UNKNOWN_STATUS";
  }
}

typedef uint32_t orch_plugin_kind;
#define ORCH_KIND_PAGER 1u
#define ORCH_KIND_ALLOCATOR 2u
#define ORCH_KIND_BACKEND 3u

typedef uint32_t orch_backend_kind;
#define ORCH_BACKEND_CPU 1u
#define ORCH_BACKEND_SIM 2u
#define ORCH_BACKEND_CUDA 3u
#define ORCH_BACKEND_HIP 4u

/* Capability bits (orch_plugin_table.capabilities). Bits are never reused. */
#define ORCH_CAP_SIGNATURES (1ull << 0)      /* pager: fault returns per-page signatures */
#define ORCH_CAP_WATERMARK_LIMIT (1ull << 1) /* pager: watermark floors */
#define ORCH_CAP_SET_WATERMARK (1ull << 2)   /* pager: region_set_watermark */
#define ORCH_CAP_RESIDENCY (1ull << 3)       /* pager: residency map */
#define ORCH_CAP_BUDGET_CAP (1ull << 4)      /* pager: per-process budget cap */
#define ORCH_CAP_LEDGER (1ull << 5)          /* pager kind implemented as the legacy ledger */
#define ORCH_CAP_CAST_BUFFERS (1ull << 6)    /* allocator: per-stream cast buffers */
#define ORCH_CAP_TORCH_ALLOC (1ull << 7)     /* allocator: orch_torch_malloc/orch_torch_free */
#define ORCH_CAP_VMM (1ull << 8)             /* backend: reserve/create/map virtual memory */
#define ORCH_CAP_HOST_REGISTER (1ull << 9)   /* backend: page-locking host memory is real */
#define ORCH_CAP_SIM_CONTROL (1ull << 10)    /* backend: orch_sim_api extension (sim only) */
#define ORCH_CAP_PRESSURE_SOURCE (1ull << 11) /* pager: L4 pressure-source selector */

/* Log levels passed to the host's log sink (spdlog's order). */
#define ORCH_LOG_TRACE 0
#define ORCH_LOG_DEBUG 1
#define ORCH_LOG_INFO 2
#define ORCH_LOG_WARN 3
#define ORCH_LOG_ERROR 4

/* Why memory was given back; carried by release reports (docs/memory-semantics.md). */
#define ORCH_RELEASE_EVICT 1u     /* watermark lowered by pressure (reclaim or fault) */
#define ORCH_RELEASE_TARGETED 2u  /* region_evict / ledger unload on request */
#define ORCH_RELEASE_UNPIN 3u     /* a page evicted while pinned was freed at unpin */
#define ORCH_RELEASE_RESET 4u     /* cast buffers released at a boundary */

typedef struct orch_release_report_v1 {
  uint32_t struct_size;
  uint32_t reason;      /* ORCH_RELEASE_* */
  int32_t device;       /* device ordinal */
  uint32_t reserved0;
  uint64_t bytes;       /* bytes returned to the device */
} orch_release_report_v1;
typedef orch_release_report_v1 orch_release_report;

/* Services the host lends a plugin at init. The host owns this struct and everything it points
 * to; it stays valid until shutdown returns. Any function may be NULL: the plugin then drops
 * logs, uses CLOCK_MONOTONIC and reports nothing. All of them may be called from any thread, and
 * report_release is called while the plugin holds its own lock: a service must return promptly
 * and must not call back into the same plugin on the calling thread. */
typedef struct orch_host_services_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  void* ctx; /* passed back verbatim */
  /* message is only valid during the call. */
  void (*log)(void* ctx, int32_t level, const char* plugin_name, const char* message);
  uint64_t (*now_ns)(void* ctx);
  void (*report_release)(void* ctx, const orch_release_report_v1* report);
} orch_host_services_v1;
typedef orch_host_services_v1 orch_host_services;

struct orch_backend_api_v1;
struct orch_pager_api_v1;
struct orch_ledger_api_v1;
struct orch_allocator_api_v1;

/* The versioned table returned by orch_plugin_query. It is static, owned by the plugin and valid
 * until the library is unloaded. Fields up to `capabilities` are frozen (docs/plugin-abi.md), and
 * the first three (struct_size, abi_major, abi_minor) stay where they are in every major, so a
 * host reads a table's major before it knows its layout.
 *
 * A host reads kind, backend and the level range as open sets: a value it does not know (a kind,
 * a backend or a level added after it was built) makes the plugin unsupported there, not
 * invalid. */
typedef struct orch_plugin_table_v1 {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  orch_plugin_kind kind;
  uint32_t reserved0;
  const char* name;    /* e.g. "sim-pager"; static */
  const char* version; /* informational only: never used to pick a plugin (docs/plugin-abi.md) */
  orch_backend_kind backend;
  uint32_t min_level; /* protocol levels spoken, 1..4 (plugins/include/orch/plugin/levels.h) */
  uint32_t max_level;
  uint32_t reserved1;
  uint64_t capabilities; /* ORCH_CAP_* */

  /* Lifecycle. init is idempotent: a second call returns ORCH_ALREADY_INITIALISED and changes
   * nothing. A failed init leaves nothing behind. shutdown may be called any number of times and
   * closes every handle still open. host may be NULL. */
  orch_status (*init)(const orch_host_services_v1* host);
  void (*shutdown)(void);

  /* Kind-specific tables; NULL when the plugin does not provide one. */
  const struct orch_backend_api_v1* backend_api;
  const struct orch_pager_api_v1* pager_api;
  const struct orch_ledger_api_v1* ledger_api;
  const struct orch_allocator_api_v1* allocator_api;
  const void* extension; /* backend-specific (sim: const orch_sim_api_v1*) */
} orch_plugin_table_v1;
typedef orch_plugin_table_v1 orch_plugin_table;

/* The entry point. host_abi_major/minor say what the host understands. A plugin answers with its
 * table of that major (orch_plugin_table_v<major>, here the v1 table for major 1), or NULL when it
 * cannot serve that major; a host that speaks several majors asks the newest first
 * (docs/plugin-abi.md, "Versions"). The returned table is owned by the plugin. */
typedef const orch_plugin_table_v1* (*orch_plugin_query_fn)(uint32_t host_abi_major,
                                                            uint32_t host_abi_minor);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_PLUGIN_H */
