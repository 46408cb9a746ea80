// A native pack built against a later minor of the node ABI, whose orch_node_class and
// orch_node_input have grown: each carries fields this worker has never heard of after the ones
// it knows, and says so in its struct_size. The worker must walk both arrays by each element's
// own struct_size (nodes.h) and run the nodes as declared.
#include <cstdint>

#include "orch/worker/nodes.h"

namespace {

// The structs as a later nodes.h might have them: ABI 1.0's fields first, appended ones after.
struct grown_input {
  orch_node_input known;
  std::uint64_t appended_flags;
  const char* appended_tooltip;
};
struct grown_class {
  orch_node_class known;
  std::uint64_t appended_flags;
  const char* appended_description;
  const char* appended_search_aliases;
};

// a + b (+ c, when given).
orch_node_status add_node(orch_node_context*, const orch_value* in, orch_value* out) {
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[0].i + in[1].i + (in[2].kind == ORCH_VALUE_INT ? in[2].i : 0);
  return ORCH_NODE_OK;
}

// The length of `text` repeated `times` times.
orch_node_status repeat_node(orch_node_context*, const orch_value* in, orch_value* out) {
  std::int64_t n = 0;
  for (const char* p = in[0].s; p != nullptr && *p != '\0'; ++p) ++n;
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = n * in[1].i;
  return ORCH_NODE_OK;
}

orch_value int_value(std::int64_t v) {
  orch_value x{};
  x.kind = ORCH_VALUE_INT;
  x.i = v;
  return x;
}
orch_value string_value(const char* s) {
  orch_value x{};
  x.kind = ORCH_VALUE_STRING;
  x.s = s;
  return x;
}

// Non-zero, so a worker that took them for the next element's fields would see garbage.
constexpr std::uint64_t junk = 0x5a5a5a5a5a5a5a5aull;

grown_input input(const char* name, const char* type, std::uint32_t flags, orch_value dflt) {
  grown_input g{};
  g.known.name = name;
  g.known.type = type;
  g.known.flags = flags;
  g.known.struct_size = sizeof(grown_input);
  g.known.default_value = dflt;
  g.appended_flags = junk;
  g.appended_tooltip = "appended after ABI 1.0";
  return g;
}

constexpr std::uint32_t req = ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_DEFAULT;
const grown_input add_inputs[] = {input("a", "INT", req, int_value(1)),
                                  input("b", "INT", req, int_value(2)),
                                  input("c", "INT", 0, {})};
const grown_input repeat_inputs[] = {input("text", "STRING", req, string_value("ab")),
                                     input("times", "INT", req, int_value(3))};
const char* const int_output[] = {"INT"};

grown_class node(const char* type, const grown_input* inputs, std::uint32_t count,
                 orch_node_execute_fn execute) {
  grown_class g{};
  g.known.struct_size = sizeof(grown_class);
  g.known.flags = ORCH_NODE_OUTPUT_NODE;
  g.known.class_type = type;
  g.known.display_name = type;
  g.known.category = "test/grown";
  g.known.inputs = &inputs[0].known;
  g.known.input_count = count;
  g.known.output_count = 1;
  g.known.outputs = int_output;
  g.known.execute = execute;
  g.appended_flags = junk;
  g.appended_description = "appended after ABI 1.0";
  g.appended_search_aliases = "appended";
  return g;
}

const grown_class classes[] = {node("GrownAdd", add_inputs, 3, &add_node),
                               node("GrownRepeat", repeat_inputs, 2, &repeat_node)};

const orch_node_set node_set{sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, &classes[0].known, 2,
                             0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    std::uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &node_set : nullptr;
}
