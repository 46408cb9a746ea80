// Entry point of the ledger plugins: a pager-kind plugin (DESIGN.md §4.4) whose table carries
// ledger_api instead of pager_api, with ORCH_CAP_LEDGER. It keeps accounts only, so one source
// serves every backend; the backend in the table is what the orchestrator's fallback matches on.
#include <mutex>
#include <set>

#include "../common/host_link.hpp"
#include "ledger_policy.hpp"
#include "orch/plugin/levels.h"

struct orch_ledger {};        // never instantiated: handles are ledger pointers
struct orch_ledger_model {};  // ... and ledger_entry pointers

namespace {

using namespace orch::plugin_detail;

#if defined(ORCH_PLUGIN_BACKEND_SIM)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_SIM;
constexpr const char* plugin_name = "sim-ledger";
#elif defined(ORCH_PLUGIN_BACKEND_CPU)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CPU;
constexpr const char* plugin_name = "cpu-ledger";
#elif defined(ORCH_PLUGIN_BACKEND_CUDA)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CUDA;
constexpr const char* plugin_name = "cuda-ledger";
#elif defined(ORCH_PLUGIN_BACKEND_HIP)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_HIP;
constexpr const char* plugin_name = "hip-ledger";
#else
#error "define one ORCH_PLUGIN_BACKEND_*"
#endif

host_link g_host{plugin_name};
lifecycle g_life;
std::mutex g_mutex;
std::set<ledger*> g_open;

ledger* as(orch_ledger* l) { return reinterpret_cast<ledger*>(l); }
ledger_entry* as(orch_ledger_model* m) { return reinterpret_cast<ledger_entry*>(m); }

orch_status plugin_init(const orch_host_services* host) {
  if (const orch_status st = g_life.begin_init(); st != ORCH_OK) return st;
  g_host.attach(host);
  g_life.finish_init(true);
  return ORCH_OK;
}

void plugin_shutdown() {
  if (!g_life.begin_shutdown()) return;
  std::lock_guard lock(g_mutex);
  for (ledger* l : g_open) delete l;
  g_open.clear();
  g_host.detach();
}

orch_status open(const orch_ledger_config* config, orch_ledger** out) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (config == nullptr || out == nullptr || config->struct_size < sizeof(orch_ledger_config))
    return ORCH_INVALID;
  auto* l = new (std::nothrow) ledger(config->budget, &g_host);
  if (l == nullptr) return ORCH_OOM_RETRYABLE;
  std::lock_guard lock(g_mutex);
  const orch_status st = guarded([&] {
    g_open.insert(l);
    return ORCH_OK;
  });
  if (st != ORCH_OK) {
    delete l;
    return st;
  }
  *out = reinterpret_cast<orch_ledger*>(l);
  return ORCH_OK;
}

void close(orch_ledger* l) {
  if (l == nullptr) return;
  std::lock_guard lock(g_mutex);
  if (g_open.erase(as(l)) != 0) delete as(l);
}

orch_status set_budget(orch_ledger* l, uint64_t bytes) {
  return l == nullptr ? ORCH_INVALID : as(l)->set_budget(bytes);
}
orch_status model_add(orch_ledger* l, uint64_t size, orch_ledger_model** m) {
  if (l == nullptr || m == nullptr) return ORCH_INVALID;
  ledger_entry* e = nullptr;
  const orch_status st = guarded([&] { return as(l)->add(size, &e); });
  if (st == ORCH_OK) *m = reinterpret_cast<orch_ledger_model*>(e);
  return st;
}
void model_remove(orch_ledger_model* m) {
  if (m != nullptr) as(m)->owner->remove(as(m));
}
orch_status model_set_refcount(orch_ledger_model* m, uint32_t refcount) {
  return m == nullptr ? ORCH_INVALID : as(m)->owner->set_refcount(as(m), refcount);
}
orch_status model_load(orch_ledger_model* m, double budget, uint64_t* loaded) {
  if (m == nullptr) return ORCH_INVALID;
  return guarded([&] { return as(m)->owner->load(as(m), budget, loaded); });
}
orch_status model_unload(orch_ledger_model* m, uint64_t* freed) {
  return m == nullptr ? ORCH_INVALID : as(m)->owner->unload(as(m), freed);
}
orch_status model_info(orch_ledger_model* m, orch_ledger_model_info* info) {
  return m == nullptr ? ORCH_INVALID : as(m)->owner->info(as(m), info);
}
orch_status free_memory(orch_ledger* l, uint64_t bytes, uint64_t* freed) {
  return l == nullptr ? ORCH_INVALID : as(l)->free_memory(bytes, freed);
}
orch_status stats(orch_ledger* l, orch_ledger_stats* s) {
  return l == nullptr ? ORCH_INVALID : as(l)->stats(s);
}

constexpr orch_ledger_api ledger_api{sizeof(orch_ledger_api), 0,           open,
                                     close,                   set_budget,  model_add,
                                     model_remove,            model_set_refcount, model_load,
                                     model_unload,            model_info,  free_memory,
                                     stats};

const orch_plugin_table& table() {
  static const orch_plugin_table t = [] {
    orch_plugin_table x{};
    x.struct_size = sizeof x;
    x.abi_major = ORCH_PLUGIN_ABI_MAJOR;
    x.abi_minor = ORCH_PLUGIN_ABI_MINOR;
    x.kind = ORCH_KIND_PAGER;
    x.name = plugin_name;
    x.version = ORCH_PLUGIN_VERSION;
    x.backend = plugin_backend;
    // The ledger is the fallback for every level (DESIGN.md §4.5 step 3).
    x.min_level = ORCH_LEVEL_MIN;
    x.max_level = ORCH_LEVEL_MAX;
    x.capabilities = ORCH_CAP_LEDGER;
    x.init = plugin_init;
    x.shutdown = plugin_shutdown;
    x.ledger_api = &ledger_api;
    return x;
  }();
  return t;
}

}  // namespace

extern "C" ORCH_PLUGIN_EXPORT const orch_plugin_table* orch_plugin_query(uint32_t /*major*/,
                                                                          uint32_t /*minor*/) {
  return &table();
}
