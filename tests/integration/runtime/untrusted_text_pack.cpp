// A native pack that hands the host text no one should trust: a STRING output and a fail()
// message holding invalid UTF-8 and ANSI escapes, a log line that tries to forge another, and a
// class whose display name and category are the same. A STRING output of "bad\xff\xfe" once
// ended the host with nlohmann's type_error.316 (tests: test_untrusted_text.cpp).
#include "orch/worker/nodes.h"

namespace {

// Invalid UTF-8, an ANSI colour, a clear-screen and a newline that would start a new line.
constexpr const char* bad_text = "bad\xff\xfe \x1b[31mred\x1b[0m \x1b[2J\nforged line";

orch_node_status bad_string(orch_node_context* ctx, const orch_value*, orch_value* out) {
  ctx->api->log(ctx, ORCH_LOG_LEVEL_WARN, bad_text);
  out[0].kind = ORCH_VALUE_STRING;
  out[0].s = bad_text;
  return ORCH_NODE_OK;
}

orch_node_status bad_fail(orch_node_context* ctx, const orch_value*, orch_value*) {
  ctx->api->fail(ctx, "value_error", bad_text);
  return ORCH_NODE_ERROR;
}

const char* const string_output[] = {"STRING"};

const orch_node_class classes[] = {
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, "UntrustedString",
     "Untrusted \x1b[31mString\xff", "test\x1b]0;retitled\x07", nullptr, 0, 1, string_output,
     &bad_string, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, "UntrustedFail", "Untrusted Fail", "test",
     nullptr, 0, 1, string_output, &bad_fail, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes, 2, 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
