// ComfyUI-ImageOps: a native pack that produces and transforms image tensors (docs/nodes.md).
// Images are ComfyUI's layout: float32 [batch, height, width, channels], values in pool buffers.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "orch/worker/nodes.h"

namespace {

std::uint64_t elements(const orch_tensor& t) {
  std::uint64_t n = 1;
  for (std::uint32_t k = 0; k < t.ndim; ++k) n *= static_cast<std::uint64_t>(t.shape[k]);
  return n;
}

orch_node_status solid_image(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::int64_t shape[4] = {1, in[1].i, in[0].i, 3};
  orch_tensor t{};
  if (ctx->api->output_tensor(ctx, ORCH_DTYPE_F32, 4, shape, &t) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "no pinned-pool space for the image");
    return ORCH_NODE_ERROR;
  }
  auto* p = static_cast<float*>(t.data);
  const float v = static_cast<float>(in[2].f);
  for (std::uint64_t i = 0, n = elements(t); i < n; ++i) p[i] = v;
  out[0].kind = ORCH_VALUE_TENSOR;
  out[0].tensor = t;
  return ORCH_NODE_OK;
}

orch_node_status invert_image(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const orch_tensor& src = in[0].tensor;
  if (src.dtype != ORCH_DTYPE_F32) {
    ctx->api->fail(ctx, "value_error", "InvertImage needs a float32 image");
    return ORCH_NODE_ERROR;
  }
  orch_tensor t{};
  if (ctx->api->output_tensor(ctx, ORCH_DTYPE_F32, src.ndim, src.shape, &t) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "no pinned-pool space for the image");
    return ORCH_NODE_ERROR;
  }
  const auto* a = static_cast<const float*>(src.data);
  auto* b = static_cast<float*>(t.data);
  for (std::uint64_t i = 0, n = elements(src); i < n; ++i) b[i] = 1.0f - a[i];
  out[0].kind = ORCH_VALUE_TENSOR;
  out[0].tensor = t;
  return ORCH_NODE_OK;
}

// An output node: the sum of the image's values (exact for the small images of the examples)
// and the pool offset it read them from, which shows the image arrived without a copy. Its UI
// (ComfyUI's "text", what a client shows for the node) says both.
orch_node_status image_checksum(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const orch_tensor& src = in[0].tensor;
  if (src.dtype != ORCH_DTYPE_F32) {
    ctx->api->fail(ctx, "value_error", "ImageChecksum needs a float32 image");
    return ORCH_NODE_ERROR;
  }
  const auto* a = static_cast<const float*>(src.data);
  double sum = 0;
  for (std::uint64_t i = 0, n = elements(src); i < n; ++i) sum += a[i];
  out[0].kind = ORCH_VALUE_FLOAT;
  out[0].f = sum;
  out[1].kind = ORCH_VALUE_INT;
  out[1].i = static_cast<std::int64_t>(src.buffer.offset);
  if (ORCH_NODE_API_HAS(ctx->api, ui)) {
    char ui[160];
    std::snprintf(ui, sizeof ui, "{\"text\": [\"checksum %.6g (pool offset %llu)\"]}", sum,
                  static_cast<unsigned long long>(src.buffer.offset));
    ctx->api->ui(ctx, ui);
  }
  return ORCH_NODE_OK;
}

orch_value int_value(std::int64_t v) {
  orch_value x{};
  x.kind = ORCH_VALUE_INT;
  x.i = v;
  return x;
}
orch_value float_value(double v) {
  orch_value x{};
  x.kind = ORCH_VALUE_FLOAT;
  x.f = v;
  return x;
}

constexpr std::uint32_t req_range = ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_MIN | ORCH_INPUT_HAS_MAX |
                                    ORCH_INPUT_HAS_DEFAULT;
const orch_node_input solid_inputs[] = {
    {"width", "INT", req_range, 0, 1, 4096, int_value(64)},
    {"height", "INT", req_range, 0, 1, 4096, int_value(64)},
    {"value", "FLOAT", req_range, 0, -1000, 1000, float_value(0.5)},
};
const orch_node_input image_input[] = {{"image", "IMAGE", ORCH_INPUT_REQUIRED, 0, 0, 0, {}}};
const char* const image_output[] = {"IMAGE"};
const char* const checksum_outputs[] = {"FLOAT", "INT"};

const orch_node_class classes[] = {
    {sizeof(orch_node_class), 0, "SolidImage", "Solid Image", "image/ops", solid_inputs, 3, 1,
     image_output, &solid_image, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), 0, "InvertImage", "Invert Image", "image/ops", image_input, 1, 1,
     image_output, &invert_image, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, "ImageChecksum", "Image Checksum", "image/ops",
     image_input, 1, 2, checksum_outputs, &image_checksum, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes, 3, 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
