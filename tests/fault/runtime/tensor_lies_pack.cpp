// A hostile native pack for test_tensor_lies.cpp only: its node allocates a real 1.5 KB image
// (float32 [1, 8, 16, 3]) and then lies about it in the output it returns, in the way `lie`
// selects. Before the host checked outputs it handed such a tensor on, and the consumer in
// another worker read past the block or died of SIGSEGV.
#include <cstdint>
#include <cstring>

#include "orch/worker/nodes.h"

namespace {

enum lie : std::int64_t {
  truthful = 0,
  height = 1,            // shape [1, claim, 16, 3]
  unknown_dtype = 2,     // dtype 99
  rank_nine = 3,         // ndim 1000: past the shape array, which the worker must not read on
  negative_dim = 4,      // shape [1, -8, 16, 3]
  overflowing_dim = 5,   // shape [1, 2^62, 16, 3]: × 4 bytes wraps past 64 bits
  descriptor_size = 6,   // buffer.size 4096 (the whole granule) and a shape that fits it
  foreign_block = 7,     // buffer.offset moved one granule on: a block it never allocated
  stale_generation = 8,  // buffer.generation + 1
};

orch_node_status lying_image(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::int64_t shape[4] = {1, 8, 16, 3};
  orch_tensor t{};
  if (ctx->api->output_tensor(ctx, ORCH_DTYPE_F32, 4, shape, &t) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "no pool space");
    return ORCH_NODE_ERROR;
  }
  auto* p = static_cast<float*>(t.data);
  for (int i = 0; i < 1 * 8 * 16 * 3; ++i) p[i] = 1.0f;
  switch (in[0].i) {
    case height:
      t.shape[1] = in[1].i;
      break;
    case unknown_dtype:
      t.dtype = 99;
      break;
    case rank_nine:
      t.ndim = 1000;
      break;
    case negative_dim:
      t.shape[1] = -8;
      break;
    case overflowing_dim:
      t.shape[1] = std::int64_t{1} << 62;
      break;
    case descriptor_size:
      t.buffer.size = 4096;
      t.shape[1] = 4096 / (16 * 3 * 4);  // 21 rows fit 4096 bytes
      break;
    case foreign_block:
      t.buffer.offset += 4096;
      break;
    case stale_generation:
      t.buffer.generation += 1;
      break;
    default:
      break;
  }
  out[0].kind = ORCH_VALUE_TENSOR;
  out[0].tensor = t;
  return ORCH_NODE_OK;
}

// The same lie inside a LATENT-like DICT ({"samples": tensor}, node ABI 1.1): a container must
// not carry a tensor past the host's checks. Static items: valid until execute returns.
orch_node_status lying_latent(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  static orch_value_item items[1];
  const orch_node_status status = lying_image(ctx, in, &items[0].value);
  if (status != ORCH_NODE_OK) return status;
  items[0].key = "samples";
  out[0].kind = ORCH_VALUE_DICT;
  out[0].i = 1;
  out[0].tensor.data = items;
  return ORCH_NODE_OK;
}

// A LIST whose only item is the list itself: the worker must stop following it, not recurse
// until its stack runs out.
orch_node_status cyclic_list(orch_node_context*, const orch_value*, orch_value* out) {
  static orch_value_item items[1];
  items[0].key = nullptr;
  items[0].value.kind = ORCH_VALUE_LIST;
  items[0].value.i = 1;
  items[0].value.tensor.data = items;
  out[0] = items[0].value;
  return ORCH_NODE_OK;
}

orch_value int_value(std::int64_t v) {
  orch_value x{};
  x.kind = ORCH_VALUE_INT;
  x.i = v;
  return x;
}

constexpr std::uint32_t req = ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_DEFAULT;
const orch_node_input lie_inputs[] = {{"lie", "INT", req, 0, 0, 0, int_value(0)},
                                      {"claim", "INT", req, 0, 0, 0, int_value(8)}};
const char* const image_output[] = {"IMAGE"};

const char* const latent_output[] = {"LATENT"};
const char* const list_output[] = {"LIST"};

const orch_node_class classes[] = {
    {sizeof(orch_node_class), 0, "LyingImage", "Lying Image", "test", lie_inputs, 2, 1,
     image_output, &lying_image, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, "LyingLatent", "Lying Latent", "test",
     lie_inputs, 2, 1, latent_output, &lying_latent, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, "CyclicList", "Cyclic List", "test", nullptr,
     0, 1, list_output, &cyclic_list, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes, 3, 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
