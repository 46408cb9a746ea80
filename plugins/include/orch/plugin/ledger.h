/* The ledger: ComfyUI's legacy weight manager as a pager-kind plugin (docs/plugin-abi.md; seed
 * "Two eras of weight management"). Whole models are loaded against a byte budget and evicted
 * whole. It keeps accounts only: the bytes themselves belong to the caller. */
#ifndef ORCH_PLUGIN_LEDGER_H
#define ORCH_PLUGIN_LEDGER_H

#include "orch/plugin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orch_ledger orch_ledger;             /* owned by the plugin */
typedef struct orch_ledger_model orch_ledger_model; /* owned by its ledger */

typedef struct orch_ledger_config_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t budget; /* bytes the loaded models may hold together */
} orch_ledger_config_v1;
typedef orch_ledger_config_v1 orch_ledger_config;

typedef struct orch_ledger_model_info_v1 {
  uint32_t struct_size;
  uint32_t refcount;
  uint64_t size;       /* model_memory() */
  uint64_t loaded;     /* bytes on the device */
  uint64_t offloaded;  /* size - loaded: model_offloaded_memory() */
  int64_t position;    /* index in the loaded list (0: most recently loaded), -1 when not loaded */
} orch_ledger_model_info_v1;
typedef orch_ledger_model_info_v1 orch_ledger_model_info;

typedef struct orch_ledger_stats_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t loads;
  uint64_t evictions;     /* whole models unloaded to make room */
  uint64_t evicted_bytes;
  uint64_t loaded_bytes;  /* current total */
} orch_ledger_stats_v1;
typedef orch_ledger_stats_v1 orch_ledger_stats;

typedef struct orch_ledger_api_v1 {
  uint32_t struct_size;
  uint32_t reserved0;
  orch_status (*open)(const orch_ledger_config_v1* config, orch_ledger** ledger);
  void (*close)(orch_ledger* ledger);
  orch_status (*set_budget)(orch_ledger* ledger, uint64_t bytes);
  orch_status (*model_add)(orch_ledger* ledger, uint64_t size, orch_ledger_model** model);
  void (*model_remove)(orch_ledger_model* model);
  /* The refcount tiebreaker of ComfyUI's sort key (sys.getrefcount of the model). */
  orch_status (*model_set_refcount)(orch_ledger_model* model, uint32_t refcount);
  /* Loads the model against its per-model budget (lowvram_model_memory), with the seed's magic
   * values kept as a double on purpose: 0 loads everything, 0.1 (any value below 1) essentially
   * nothing; an integer cast would invert 0.1 into 0. Other models are evicted whole, in
   * ComfyUI's order, until the load fits; what still does not fit stays offloaded (a partial
   * load). *loaded receives the model's resident bytes. The model moves to position 0. */
  orch_status (*model_load)(orch_ledger_model* model, double model_budget, uint64_t* loaded);
  orch_status (*model_unload)(orch_ledger_model* model, uint64_t* freed);
  orch_status (*model_info)(orch_ledger_model* model, orch_ledger_model_info_v1* info);
  /* free_memory: evicts whole models in ComfyUI's order until `bytes` are free in the budget.
   * *freed: bytes unloaded. ORCH_OOM_RETRYABLE when even evicting all did not reach it. */
  orch_status (*free_memory)(orch_ledger* ledger, uint64_t bytes, uint64_t* freed);
  orch_status (*stats)(orch_ledger* ledger, orch_ledger_stats_v1* stats);
} orch_ledger_api_v1;
typedef orch_ledger_api_v1 orch_ledger_api;

#ifdef __cplusplus
}
#endif

#endif /* ORCH_PLUGIN_LEDGER_H */
