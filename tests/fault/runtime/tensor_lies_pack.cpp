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

const orch_node_class classes[] = {
    {sizeof(orch_node_class), 0, "LyingImage", "Lying Image", "test", lie_inputs, 2, 1,
     image_output, &lying_image, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes, 1, 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
