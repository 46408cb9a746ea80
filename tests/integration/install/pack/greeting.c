/* Greeting: one output node whose STRING names the executable of the process it runs in, so a
 * test sees which comfy-orch-worker the host spawned (docs/nodes.md for the ABI). */
#define _GNU_SOURCE /* readlink */
#include <unistd.h>

#include "orch/worker/nodes.h"

static char text[4200];

static orch_node_status greet(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  static const char prefix[] = "hello from ";
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  (void)in;
  if (n < 0) {
    ctx->api->fail(ctx, "os_error", "cannot read /proc/self/exe");
    return ORCH_NODE_ERROR;
  }
  exe[n] = '\0';
  size_t k = 0;
  for (const char* p = prefix; *p != '\0'; ++p) text[k++] = *p;
  for (const char* p = exe; *p != '\0'; ++p) text[k++] = *p;
  text[k] = '\0';
  out[0].kind = ORCH_VALUE_STRING;
  out[0].s = text;
  return ORCH_NODE_OK;
}

static const char* const outputs[] = {"STRING"};

static const orch_node_class classes[] = {{
    .struct_size = sizeof(orch_node_class),
    .flags = ORCH_NODE_OUTPUT_NODE,
    .class_type = "Greeting",
    .display_name = "Greeting",
    .category = "test/install",
    .output_count = 1,
    .outputs = outputs,
    .execute = greet,
}};

static const orch_node_set set = {
    .struct_size = sizeof(orch_node_set),
    .abi_major = ORCH_NODES_ABI_MAJOR,
    .classes = classes,
    .count = 1,
};

__attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : NULL;
}
