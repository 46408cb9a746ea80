/* A sim pager whose init always fails, for the worker's failed-init rule (issue 6): the worker
 * must deinitialise it and run the ledger, with the error as its reason. */
#include "orch/plugin/pager.h"

static orch_status failing_init(const orch_host_services* host) {
  (void)host;
  return ORCH_DEVICE_ERROR;
}
static void failing_shutdown(void) {}
static orch_pager_api failing_api; /* zeroed: never called, the init fails first */
static const orch_plugin_table failing_table = {
    sizeof(orch_plugin_table), ORCH_PLUGIN_ABI_MAJOR, ORCH_PLUGIN_ABI_MINOR, ORCH_KIND_PAGER, 0,
    "sim-pager-broken", "0.0.1-broken", ORCH_BACKEND_SIM, 1, 4, 0, 0, failing_init,
    failing_shutdown, 0, &failing_api, 0, 0, 0};

ORCH_PLUGIN_EXPORT const orch_plugin_table* orch_plugin_query(uint32_t major, uint32_t minor) {
  (void)major;
  (void)minor;
  return &failing_table;
}
