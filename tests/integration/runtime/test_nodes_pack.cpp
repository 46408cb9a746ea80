// A native pack for the runtime's tests and benchmarks only: nodes that sleep (watching the
// interruption flag), fail with a typed error, crash the worker, or do nothing at all; and two
// that stand for ComfyUI's LoadImage and SaveImage, for the gateway's files (a native node is not
// told serve's input and output directories: these read them from ORCH_TEST_HOST_FILES).
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "orch/worker/nodes.h"

// Built twice: the "B" variant's classes carry a B suffix, so two packs (two workers) can hand
// tensors to each other in the handoff benchmark.
#ifdef ORCH_TEST_PACK_VARIANT_B
#define NAME(x) x "B"
#else
#define NAME(x) x
#endif

namespace {

// Sleeps `ms`, first reserving `pin_mib` MiB of pinned budget that it keeps (like a loaded
// model's staging copy), so a kill mid-call leaves bytes in the worker's budget slot.
orch_node_status sleep_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  if (in[1].i > 0 && ctx->api->pinned_reserve(ctx, static_cast<std::uint64_t>(in[1].i) << 20) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "pinned budget refused");
    return ORCH_NODE_ERROR;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(in[0].i);
  std::uint64_t ticks = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (ctx->api->interrupted(ctx)) return ORCH_NODE_INTERRUPTED;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (++ticks % 50 == 0) ctx->api->progress(ctx, ticks, static_cast<std::uint64_t>(in[0].i));
  }
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[0].i;
  return ORCH_NODE_OK;
}

// Reports progress `count` times back to back, then returns `count`: the reports leave on the
// channel just before the answer, so a host that let the answer overtake them would show it.
orch_node_status progress_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const auto count = static_cast<std::uint64_t>(in[0].i);
  for (std::uint64_t i = 1; i <= count; ++i) ctx->api->progress(ctx, i, count);
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[0].i;
  return ORCH_NODE_OK;
}

// Sleeps `ms` without ever looking at interrupted(): a node that an interrupt cannot stop, so
// only a forced shutdown ends the call.
orch_node_status busy_node(orch_node_context*, const orch_value* in, orch_value* out) {
  std::this_thread::sleep_for(std::chrono::milliseconds(in[0].i));
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[0].i;
  return ORCH_NODE_OK;
}

orch_node_status fail_node(orch_node_context* ctx, const orch_value*, orch_value*) {
  ctx->api->fail(ctx, "value_error", "TestFail always fails");
  return ORCH_NODE_ERROR;
}

// Dies by a plain SIGABRT, leaving no core file behind.
[[noreturn]] orch_node_status crash_node(orch_node_context*, const orch_value*, orch_value*) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

orch_node_status empty_node(orch_node_context*, const orch_value*, orch_value* out) {
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = 1;
  return ORCH_NODE_OK;
}

// ComfyUI's VALIDATE_INPUTS through the C ABI (1.2): refuses 13, and reports what a class method
// may not do (allocate a tensor: 99) or see (an interrupt: any value while one is set).
orch_node_status checked_validate(orch_node_context* ctx, const orch_value* in, orch_value*) {
  if (ctx->api->interrupted(ctx)) {
    ctx->api->fail(ctx, "custom_validation_failed", "interrupted during validation");
    return ORCH_NODE_ERROR;
  }
  if (in[0].kind == ORCH_VALUE_INT && in[0].i == 99) {
    const std::int64_t shape[1] = {4};
    orch_tensor t{};
    const int32_t status = ctx->api->output_tensor(ctx, ORCH_DTYPE_F32, 1, shape, &t);
    ctx->api->fail(ctx, "custom_validation_failed",
                   status == 0 ? "output_tensor allocated" : "output_tensor refused");
    return ORCH_NODE_ERROR;
  }
  if (in[0].kind == ORCH_VALUE_INT && in[0].i == 13) {
    ctx->api->fail(ctx, "custom_validation_failed", "13 is refused");
    return ORCH_NODE_ERROR;
  }
  return ORCH_NODE_OK;
}

// ComfyUI's IS_CHANGED: the change key is twice the value.
orch_node_status checked_is_changed(orch_node_context*, const orch_value* in, orch_value* out) {
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[0].kind == ORCH_VALUE_INT ? in[0].i * 2 : -1;
  return ORCH_NODE_OK;
}

// A tensor of `mib` MiB whose first and last bytes are set, for the handoff benchmark.
orch_node_status blob_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::int64_t shape[1] = {in[0].i << 20};
  orch_tensor t{};
  if (ctx->api->output_tensor(ctx, ORCH_DTYPE_U8, 1, shape, &t) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "no pool space");
    return ORCH_NODE_ERROR;
  }
  static_cast<unsigned char*>(t.data)[0] = 7;
  static_cast<unsigned char*>(t.data)[shape[0] - 1] = 9;
  out[0].kind = ORCH_VALUE_TENSOR;
  out[0].tensor = t;
  return ORCH_NODE_OK;
}

orch_node_status blob_peek(orch_node_context*, const orch_value* in, orch_value* out) {
  const auto* p = static_cast<const unsigned char*>(in[0].tensor.data);
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = p[0] + p[in[0].tensor.shape[0] - 1];
  return ORCH_NODE_OK;
}

// Faults the first `mib` MiB of a 64 MiB model region and takes a cast buffer of `mib` MiB on
// stream 0, then returns (or fails when `fail` is set) without unpinning: the worker's node
// boundary must release both.
orch_node_status pin_and_cast(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(in[0].i) << 20;
  orch_node_region* region = nullptr;
  int32_t created = 0;
  if (ctx->api->region(ctx, "test-model", 64ull << 20, &region, &created) != 0 ||
      ctx->api->region_fault(ctx, region, 0, bytes) != 0) {
    ctx->api->fail(ctx, "model_load_failed", "no region");
    return ORCH_NODE_ERROR;
  }
  std::uint64_t address = 0;
  ctx->api->cast_buffer(ctx, 0, bytes, &address);
  if (in[1].i != 0) {
    ctx->api->fail(ctx, "value_error", "TestPinAndCast was told to fail");
    return ORCH_NODE_ERROR;
  }
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = 1;
  return ORCH_NODE_OK;
}

// Asks for the model region "region-<mib>" of `mib` MiB and faults all of it. Returns the first
// status that is not ORCH_OK (region's, else the fault's), as a node that streams its weight on
// ORCH_OOM_RETRYABLE would see it, and leaves the pin to the node boundary.
orch_node_status region_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(in[0].i) << 20;
  const std::string key = "region-" + std::to_string(in[0].i);
  orch_node_region* region = nullptr;
  int32_t created = 0;
  int32_t st = ctx->api->region(ctx, key.c_str(), bytes, &region, &created);
  if (st == 0) st = ctx->api->region_fault(ctx, region, 0, bytes);
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = st;
  return ORCH_NODE_OK;
}

// A loader as ComfyUI's CheckpointLoaderSimple is named: its ckpt_name input names the file, and
// it holds the 4 MiB model region "ckpt-<name>", faulted, for serve's GET /orch/fleet/host.
orch_node_status checkpoint_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::string key = std::string("ckpt-") + (in[0].s != nullptr ? in[0].s : "");
  constexpr std::uint64_t bytes = 4ull << 20;
  orch_node_region* region = nullptr;
  int32_t created = 0;
  int32_t st = ctx->api->region(ctx, key.c_str(), bytes, &region, &created);
  if (st == 0) st = ctx->api->region_fault(ctx, region, 0, bytes);
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = st;
  return ORCH_NODE_OK;
}

// A cast buffer of `mib` MiB on `stream`, kept past the node (the ledger's carry).
orch_node_status cast_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  std::uint64_t address = 0;
  const int32_t st = ctx->api->cast_buffer(ctx, static_cast<std::uint32_t>(in[1].i),
                                           static_cast<std::uint64_t>(in[0].i) << 20, &address);
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = st;
  return ORCH_NODE_OK;
}

// The directory whose input/ and output/ are this host's (ORCH_TEST_HOST_FILES), or "".
std::string host_files() {
  const char* dir = std::getenv("ORCH_TEST_HOST_FILES");
  return dir != nullptr ? dir : "";
}

// As LoadImage: `image` names a file of the host's input directory ("x.png", "sub/x.png", or
// "x.png [input]"); it fails naming the file when it is not there. Its output: the file's size.
orch_node_status load_input_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  std::string name = in[0].s != nullptr ? in[0].s : "";
  const std::string annotation = " [input]";
  if (name.size() > annotation.size() &&
      name.compare(name.size() - annotation.size(), annotation.size(), annotation) == 0)
    name.resize(name.size() - annotation.size());
  std::ifstream file(host_files() + "/input/" + name, std::ios::binary);
  if (!file) {
    ctx->api->fail(ctx, "file_not_found", ("no input file " + name + " on this host").c_str());
    return ORCH_NODE_ERROR;
  }
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = static_cast<std::int64_t>(bytes.size());
  return ORCH_NODE_OK;
}

// As SaveImage: writes `bytes` bytes (a pattern of `seed`) as <prefix>_<seed>.png in the host's
// output directory and names it in its ui, {"images": [{filename, subfolder, type}]}.
orch_node_status save_output_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  const std::string name =
      std::string(in[0].s != nullptr ? in[0].s : "out") + "_" + std::to_string(in[2].i) + ".png";
  std::string bytes(static_cast<std::size_t>(in[1].i), '\0');
  std::uint64_t x = static_cast<std::uint64_t>(in[2].i) * 0x9e3779b97f4a7c15ull + 1;
  for (auto& c : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  std::ofstream(host_files() + "/output/" + name, std::ios::binary) << bytes;
  const std::string ui =
      R"({"images": [{"filename": ")" + name + R"(", "subfolder": "", "type": "output"}]})";
  if (ORCH_NODE_API_HAS(ctx->api, ui)) ctx->api->ui(ctx, ui.c_str());
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = in[1].i;
  return ORCH_NODE_OK;
}

orch_value int_value(std::int64_t v) {
  orch_value x{};
  x.kind = ORCH_VALUE_INT;
  x.i = v;
  return x;
}

constexpr std::uint32_t req = ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_DEFAULT;
const orch_node_input ms_input[] = {{"ms", "INT", req, 0, 0, 0, int_value(100)},
                                    {"pin_mib", "INT", ORCH_INPUT_HAS_DEFAULT, 0, 0, 0, int_value(0)}};
const orch_node_input count_input[] = {{"count", "INT", req, 0, 0, 0, int_value(20)}};
const orch_node_input mib_input[] = {{"mib", "INT", req, 0, 0, 0, int_value(1)}};
const orch_node_input blob_input[] = {{"blob", "BLOB", ORCH_INPUT_REQUIRED, 0, 0, 0, {}}};
const orch_node_input pin_inputs[] = {{"mib", "INT", req, 0, 0, 0, int_value(4)},
                                      {"fail", "INT", req, 0, 0, 0, int_value(0)}};
const orch_node_input cast_inputs[] = {{"mib", "INT", req, 0, 0, 0, int_value(16)},
                                       {"stream", "INT", req, 0, 0, 0, int_value(0)}};
const orch_node_input checked_input[] = {
    {"value", "INT", req | ORCH_INPUT_HAS_MIN | ORCH_INPUT_HAS_MAX, 0, 0, 100, int_value(1)}};
const orch_node_input ckpt_input[] = {{"ckpt_name", "STRING", ORCH_INPUT_REQUIRED, 0, 0, 0, {}}};
const orch_node_input load_input[] = {{"image", "STRING", ORCH_INPUT_REQUIRED, 0, 0, 0, {}}};
const orch_node_input save_inputs[] = {
    {"filename_prefix", "STRING", ORCH_INPUT_REQUIRED, 0, 0, 0, {}},
    {"bytes", "INT", req, 0, 0, 0, int_value(64)},
    {"seed", "INT", req, 0, 0, 0, int_value(0)}};
const char* const int_output[] = {"INT"};
const char* const blob_output[] = {"BLOB"};

const orch_node_class classes[] = {
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestSleep"), "Sleep", "test", ms_input,
     2, 1, int_output, &sleep_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestFail"), "Fail", "test", nullptr, 0,
     1, int_output, &fail_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE | ORCH_NODE_NOT_IDEMPOTENT, NAME("TestCrash"),
     "Crash", "test", nullptr, 0, 1, int_output, &crash_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestEmpty"), "Empty", "test", nullptr, 0,
     1, int_output, &empty_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), 0, NAME("TestBlob"), "Blob", "test", mib_input, 1, 1, blob_output,
     &blob_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestBlobPeek"), "Blob Peek", "test",
     blob_input, 1, 1, int_output, &blob_peek, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestPinAndCast"), "Pin and Cast", "test",
     pin_inputs, 2, 1, int_output, &pin_and_cast, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestCast"), "Cast", "test", cast_inputs,
     2, 1, int_output, &cast_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestBusy"), "Busy", "test", ms_input, 2,
     1, int_output, &busy_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE | ORCH_NODE_NOT_IDEMPOTENT, NAME("TestRegion"),
     "Region", "test", mib_input, 1, 1, int_output, &region_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestChecked"), "Checked", "test",
     checked_input, 1, 1, int_output, &empty_node, nullptr, &checked_validate, &checked_is_changed},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestCheckpointLoader"),
     "Checkpoint Loader", "test", ckpt_input, 1, 1, int_output, &checkpoint_node, nullptr, nullptr,
     nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestLoadInput"), "Load Input", "test",
     load_input, 1, 1, int_output, &load_input_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE | ORCH_NODE_NOT_IDEMPOTENT,
     NAME("TestSaveOutput"), "Save Output", "test", save_inputs, 3, 1, int_output,
     &save_output_node, nullptr, nullptr, nullptr},
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE, NAME("TestProgress"), "Progress", "test",
     count_input, 1, 1, int_output, &progress_node, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes,
                           sizeof(classes) / sizeof(classes[0]), 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
