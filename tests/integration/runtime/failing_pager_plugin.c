/* A sim pager whose init always fails, for the worker's failed-init rule: the worker
 * must deinitialise it and run the ledger, with the error as its reason. */
#include "orch/plugin/pager.h"

static orch_status failing_init(const orch_host_services* host) {
  (void)host;
  return ORCH_DEVICE_ERROR;
}
static void failing_shutdown(void) {}
/* Every entry NULL: never called, the init fails first. The size is ABI 1's, which the loader
 * checks before it reads the table. */
static const orch_pager_api failing_api = {.struct_size = sizeof(orch_pager_api)};
static const orch_plugin_table failing_table = {.struct_size = sizeof(orch_plugin_table),
                                                .abi_major = ORCH_PLUGIN_ABI_MAJOR,
                                                .abi_minor = ORCH_PLUGIN_ABI_MINOR,
                                                .kind = ORCH_KIND_PAGER,
                                                .name = "sim-pager-broken",
                                                .version = "0.0.1-broken",
                                                .backend = ORCH_BACKEND_SIM,
                                                .min_level = 1,
                                                .max_level = 4,
                                                .init = failing_init,
                                                .shutdown = failing_shutdown,
                                                .pager_api = &failing_api};

ORCH_PLUGIN_EXPORT const orch_plugin_table* orch_plugin_query(uint32_t major, uint32_t minor) {
  (void)major;
  (void)minor;
  return &failing_table;
}
