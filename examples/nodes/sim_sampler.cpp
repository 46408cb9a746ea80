// ComfyUI-SimSampler: a native pack that "loads a model" into a pager region on the sim device
// and samples with it (docs/nodes.md). Every step faults each layer's pages (pinning them), takes
// a cast buffer for the layer on its offload stream, and unpins: the access pattern of ComfyUI's
// dynamic-VRAM model loading (docs/references.md, aimdo §4.10), without real math.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "orch/worker/nodes.h"

namespace {

constexpr std::uint64_t mib = 1ull << 20;

struct model_key {
  std::int64_t size_mib = 0;
  std::int64_t layers = 0;
};

std::string handle_of(const model_key& k) {
  return "sim-model-" + std::to_string(k.size_mib) + "mib-" + std::to_string(k.layers) + "l";
}

bool parse_handle(const char* s, model_key& k) {
  long long size = 0, layers = 0;
  if (s == nullptr || std::sscanf(s, "sim-model-%lldmib-%lldl", &size, &layers) != 2) return false;
  k.size_mib = size;
  k.layers = layers;
  return size > 0 && layers > 0;
}

orch_node_status load_model(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const model_key k{in[0].i, in[1].i};
  const std::string handle = handle_of(k);
  const std::uint64_t bytes = static_cast<std::uint64_t>(k.size_mib) * mib;
  orch_node_region* region = nullptr;
  int32_t created = 0;
  const int32_t st = ctx->api->region(ctx, handle.c_str(), bytes, &region, &created);
  if (st == 1) {  // OOM_RETRYABLE: the host may free memory through its stand-ins and retry
    ctx->api->fail(ctx, "out_of_memory", ("the device cannot hold " + handle + " now").c_str());
    return ORCH_NODE_ERROR;
  }
  if (st != 0) {
    ctx->api->fail(ctx, "model_load_failed", "this worker has no model memory (pager or ledger)");
    return ORCH_NODE_ERROR;
  }
  if (created != 0) {
    // The model's weights are staged in host pinned memory, as ComfyUI pins offloaded weights:
    // that is reserved from this worker's slot of the one budget.
    if (ctx->api->pinned_reserve(ctx, bytes) != 0) {
      ctx->api->fail(ctx, "out_of_memory", "the pinned budget cannot hold the model's weights");
      return ORCH_NODE_ERROR;
    }
    ctx->api->log(ctx, ORCH_LOG_LEVEL_INFO, ("loaded " + handle).c_str());
  }
  static thread_local std::string result;
  result = handle;
  out[0].kind = ORCH_VALUE_STRING;
  out[0].s = result.c_str();
  return ORCH_NODE_OK;
}

orch_node_status sample(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  model_key k;
  if (!parse_handle(in[0].s, k)) {
    ctx->api->fail(ctx, "value_error", "model is not a SimLoadModel handle");
    return ORCH_NODE_ERROR;
  }
  const orch_tensor& latent = in[1].tensor;
  const std::int64_t steps = in[2].i;
  // Optional: the time a step takes on a real device, so a demo (or a client's test) sees a
  // sampler's progress arrive over time rather than all in a millisecond.
  const std::int64_t step_ms = in[3].kind == ORCH_VALUE_INT ? in[3].i : 0;
  const std::uint64_t bytes = static_cast<std::uint64_t>(k.size_mib) * mib;
  const std::uint64_t layer = bytes / static_cast<std::uint64_t>(k.layers);
  orch_node_region* region = nullptr;
  int32_t created = 0;
  if (ctx->api->region(ctx, handle_of(k).c_str(), bytes, &region, &created) != 0) {
    ctx->api->fail(ctx, "model_load_failed", "the model's region is gone");
    return ORCH_NODE_ERROR;
  }
  const std::uint32_t streams = ctx->api->streams(ctx);
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t l = 0; l < k.layers; ++l) {
      if (ctx->api->interrupted(ctx)) return ORCH_NODE_INTERRUPTED;
      const std::uint64_t offset = static_cast<std::uint64_t>(l) * layer;
      const int32_t st = ctx->api->region_fault(ctx, region, offset, layer);
      if (st == 0) {
        ctx->api->region_unpin(ctx, region, offset, layer);
      }
      // Resident or not, the layer is cast into a per-stream buffer before use; when the fault
      // answered "retry later" the weight is streamed through the same buffer instead.
      if (streams > 0) {
        std::uint64_t address = 0;
        ctx->api->cast_buffer(ctx, static_cast<std::uint32_t>(l) % streams, layer, &address);
      }
    }
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    ctx->api->progress(ctx, static_cast<std::uint64_t>(s + 1), static_cast<std::uint64_t>(steps));
  }
  orch_tensor t{};
  if (ctx->api->output_tensor(ctx, latent.dtype, latent.ndim, latent.shape, &t) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "no pinned-pool space for the result");
    return ORCH_NODE_ERROR;
  }
  // Each step adds 1/8: exact in float32, so tests can check every value.
  std::uint64_t n = 1;
  for (std::uint32_t d = 0; d < latent.ndim; ++d) n *= static_cast<std::uint64_t>(latent.shape[d]);
  const auto* a = static_cast<const float*>(latent.data);
  auto* b = static_cast<float*>(t.data);
  for (std::uint64_t i = 0; i < n; ++i) b[i] = a[i] + 0.125f * static_cast<float>(steps);
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

constexpr std::uint32_t req_range = ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_MIN | ORCH_INPUT_HAS_MAX |
                                    ORCH_INPUT_HAS_DEFAULT;
const orch_node_input load_inputs[] = {
    {"size_mib", "INT", req_range, 0, 1, 4096, int_value(64)},
    {"layers", "INT", req_range, 0, 1, 256, int_value(8)},
};
const orch_node_input sample_inputs[] = {
    {"model", "MODEL", ORCH_INPUT_REQUIRED, 0, 0, 0, {}},
    {"latent", "IMAGE", ORCH_INPUT_REQUIRED, 0, 0, 0, {}},
    {"steps", "INT", req_range, 0, 1, 1000, int_value(4)},
    {"step_ms", "INT", ORCH_INPUT_HAS_MIN | ORCH_INPUT_HAS_MAX | ORCH_INPUT_HAS_DEFAULT, 0, 0, 1000,
     int_value(0)},
};
const char* const model_output[] = {"MODEL"};
const char* const image_output[] = {"IMAGE"};

// The same nodes under other names for the legacy pack (ComfyUI-LegacySampler), which pins its
// worker to the ledger; a prompt can then use both packs without a class clash.
#ifdef ORCH_LEGACY_SAMPLER
#define ORCH_SAMPLER_NAME(n) "Legacy" n
#else
#define ORCH_SAMPLER_NAME(n) "Sim" n
#endif
const orch_node_class classes[] = {
    {sizeof(orch_node_class), 0, ORCH_SAMPLER_NAME("LoadModel"), "Load Model (sim)", "sampling/sim",
     load_inputs, 2, 1, model_output, &load_model, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), 0, ORCH_SAMPLER_NAME("Sampler"), "Sampler (sim)", "sampling/sim",
     sample_inputs, 4, 1, image_output, &sample, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes, 2, 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
