// Entry point of the allocator plugins: the C ABI over cast_allocator, plus the exports shaped
// for torch's CUDAPluggableAllocator (plugins/exports/allocator.map). The backend kind, and so
// the default number of offload streams, comes from ORCH_PLUGIN_BACKEND_*.
#include <cstddef>
#include <sys/types.h>

#include <map>
#include <mutex>

#include "../common/host_link.hpp"
#include "../common/plugin_backend.hpp"
#include "../common/plugin_entry.hpp"
#include "cast_allocator.hpp"

struct orch_allocator {};  // never instantiated: handles are cast_allocator pointers

namespace {

using namespace orch::plugin_detail;

constexpr orch_backend_kind plugin_backend = ORCH_PLUGIN_BACKEND_KIND;
constexpr const char* plugin_name = ORCH_PLUGIN_BACKEND_NAME "-allocator";

// ComfyUI: two offload streams on NVIDIA and AMD; none elsewhere, where get_offload_stream
// returns None and the staging buffer is a per-call tensor (docs/references.md, seed "Carry").
constexpr uint32_t default_streams = plugin_backend == ORCH_BACKEND_CPU ? 0u : 2u;

host_link g_host{plugin_name};
lifecycle g_life;
std::mutex g_mutex;
std::map<cast_allocator*, int32_t> g_open;  // every open allocator and its device ordinal

cast_allocator* as(orch_allocator* a) {
  return reinterpret_cast<cast_allocator*>(a);
}

cast_allocator* for_device(int device) {
  for (auto& [a, ordinal] : g_open)
    if (ordinal == device) return a;
  return nullptr;
}

orch_status plugin_init(const orch_host_services* host) {
  return init_plugin(g_life, g_host, host);
}

void plugin_shutdown() {
  if (!g_life.begin_shutdown()) return;
  std::lock_guard lock(g_mutex);
  for (auto& [a, ordinal] : g_open) delete a;
  g_open.clear();
  g_host.detach();
}

orch_status open(const orch_allocator_config* config, orch_allocator** out) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  // ABI 1.0's struct ends with pager; backend_api and device were appended (cast_allocator.cpp
  // reads them only after ORCH_HAS_FIELD).
  if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, pager)) return ORCH_INVALID;
  if (config->level < ORCH_LEVEL_MIN || config->level > ORCH_LEVEL_MAX) return ORCH_UNSUPPORTED;
  const uint32_t streams =
      config->streams == ORCH_ALLOC_STREAMS_DEFAULT ? default_streams : config->streams;
  if (plugin_backend == ORCH_BACKEND_CPU && streams != 0) return ORCH_UNSUPPORTED;
  std::lock_guard lock(g_mutex);
  if (!g_life.up()) return ORCH_NOT_INITIALISED;  // a shutdown ran since the check above
  if (for_device(config->ordinal) != nullptr) return ORCH_ALREADY_INITIALISED;
  cast_allocator* a = nullptr;
  if (const orch_status st =
          guarded([&] { return cast_allocator::open(*config, streams, &g_host, &a); });
      st != ORCH_OK)
    return st;
  if (const orch_status st = guarded([&] {
        g_open.emplace(a, config->ordinal);
        return ORCH_OK;
      });
      st != ORCH_OK) {
    delete a;
    return st;
  }
  *out = reinterpret_cast<orch_allocator*>(a);
  return ORCH_OK;
}

void close(orch_allocator* a) {
  if (a == nullptr) return;
  std::lock_guard lock(g_mutex);
  if (g_life.up() && g_open.erase(as(a)) != 0) delete as(a);
}

// Runs call(allocator) when a is open in a live plugin. The handle is looked up, never
// dereferenced first: after close or shutdown it points at freed memory. g_mutex is held for the
// call so a concurrent close waits (the torch exports hold it the same way).
template <typename F>
orch_status with_allocator(orch_allocator* a, F&& call) {
  std::lock_guard lock(g_mutex);
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (a == nullptr || g_open.count(as(a)) == 0) return ORCH_INVALID;
  return guarded([&] { return call(*as(a)); });
}

orch_status cast_buffer(orch_allocator* a, uint32_t stream, uint64_t size, uint64_t* address) {
  return with_allocator(a, [&](cast_allocator& x) { return x.cast_buffer(stream, size, address); });
}

orch_status reset_cast_buffers(orch_allocator* a) {
  return with_allocator(a, [&](cast_allocator& x) { return x.reset(); });
}

orch_status cast_stats(orch_allocator* a, orch_cast_stats* s) {
  return with_allocator(a, [&](cast_allocator& x) { return x.stats(s); });
}

constexpr orch_allocator_api allocator_api{.struct_size = sizeof(orch_allocator_api),
                                           .reserved0 = 0,
                                           .open = open,
                                           .close = close,
                                           .cast_buffer = cast_buffer,
                                           .reset_cast_buffers = reset_cast_buffers,
                                           .cast_stats = cast_stats};

constexpr orch_plugin_table table = make_plugin_table(
    {.kind = ORCH_KIND_ALLOCATOR,
     .name = plugin_name,
     .backend = plugin_backend,
     .min_level = ORCH_LEVEL_1,
     .max_level = ORCH_LEVEL_4,
     .capabilities = ORCH_CAP_TORCH_ALLOC | (default_streams > 0 ? ORCH_CAP_CAST_BUFFERS : 0)},
    {.init = plugin_init, .shutdown = plugin_shutdown, .allocator_api = &allocator_api});

}  // namespace

ORCH_PLUGIN_QUERY(table)

extern "C" {

// torch.cuda.memory.CUDAPluggableAllocator(path, "orch_torch_malloc", "orch_torch_free").
ORCH_PLUGIN_EXPORT void* orch_torch_malloc(ssize_t size, int device, void* /*stream*/) {
  if (size <= 0 || !g_life.up()) return nullptr;
  std::lock_guard lock(g_mutex);
  cast_allocator* a = for_device(device);
  return a == nullptr ? nullptr : a->torch_malloc(static_cast<uint64_t>(size));
}

ORCH_PLUGIN_EXPORT void orch_torch_free(void* ptr, ssize_t /*size*/, int device, void* /*stream*/) {
  if (ptr == nullptr || !g_life.up()) return;
  std::lock_guard lock(g_mutex);
  if (cast_allocator* a = for_device(device); a != nullptr) a->torch_free(ptr);
}

}  // extern "C"
