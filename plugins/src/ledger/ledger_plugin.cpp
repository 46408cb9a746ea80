// Entry point of the ledger plugins: a pager-kind plugin (docs/plugin-abi.md) whose table carries
// ledger_api instead of pager_api, with ORCH_CAP_LEDGER. It keeps accounts only, so one source
// serves every backend; the backend in the table is what the orchestrator's fallback matches on.
#include "../common/handle_registry.hpp"
#include "../common/host_link.hpp"
#include "../common/plugin_backend.hpp"
#include "../common/plugin_entry.hpp"
#include "ledger_policy.hpp"
#include "orch/plugin/levels.h"

struct orch_ledger {};        // never instantiated: handles are ledger pointers
struct orch_ledger_model {};  // ... and ledger_entry pointers

namespace {

using namespace orch::plugin_detail;

constexpr orch_backend_kind plugin_backend = ORCH_PLUGIN_BACKEND_KIND;
constexpr const char* plugin_name = ORCH_PLUGIN_BACKEND_NAME "-ledger";

host_link g_host{plugin_name};
lifecycle g_life;
// Open ledgers and their models: every entry point checks its handle here first, so a handle
// used after close, model_remove or shutdown is refused instead of dereferenced.
handle_registry g_handles;
constexpr uint32_t ledger_handle = 1;
constexpr uint32_t model_handle = 2;

ledger* as(orch_ledger* l) {
  return reinterpret_cast<ledger*>(l);
}
ledger_entry* as(orch_ledger_model* m) {
  return reinterpret_cast<ledger_entry*>(m);
}

orch_status plugin_init(const orch_host_services* host) {
  return init_plugin(g_life, g_host, host);
}

void plugin_shutdown() {
  if (!g_life.begin_shutdown()) return;
  auto lock = g_handles.exclusive();  // waits for calls in flight
  g_handles.for_each_locked(ledger_handle,
                            [](const void* l) { delete static_cast<const ledger*>(l); });
  g_handles.clear_locked();
  g_host.detach();
}

orch_status open(const orch_ledger_config* config, orch_ledger** out) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, budget)) return ORCH_INVALID;
  auto* l = new (std::nothrow) ledger(config->budget, &g_host);
  if (l == nullptr) return ORCH_HOST_OOM;
  auto lock = g_handles.exclusive();
  const orch_status st = g_life.up() ? guarded([&] {
    g_handles.add_locked(l, ledger_handle);
    return ORCH_OK;
  })
                                     : ORCH_NOT_INITIALISED;
  if (st != ORCH_OK) {
    delete l;
    return st;
  }
  *out = reinterpret_cast<orch_ledger*>(l);
  return ORCH_OK;
}

void close(orch_ledger* l) {
  auto lock = g_handles.exclusive();
  if (!g_life.up() || !g_handles.contains_locked(l, ledger_handle)) return;
  g_handles.remove_owned_locked(l);  // its models die with it
  g_handles.remove_locked(l);
  delete as(l);
}

// Runs call(...) when the handle is live in a live plugin; the status of the check otherwise.
template <typename F>
orch_status with_ledger(orch_ledger* l, F&& call) {
  const handle_registry::use use(g_handles, g_life, l, ledger_handle);
  if (!use) return use.status();
  return guarded([&] { return call(*as(l)); });
}
template <typename F>
orch_status with_model(orch_ledger_model* m, F&& call) {
  const handle_registry::use use(g_handles, g_life, m, model_handle);
  if (!use) return use.status();
  return guarded([&] { return call(*as(m)->owner, as(m)); });
}

orch_status set_budget(orch_ledger* l, uint64_t bytes) {
  return with_ledger(l, [&](ledger& x) { return x.set_budget(bytes); });
}
orch_status model_add(orch_ledger* l, uint64_t size, orch_ledger_model** m) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (m == nullptr) return ORCH_INVALID;
  return guarded([&] {
    auto lock = g_handles.exclusive();  // the model is registered before anyone can see it
    if (!g_life.up()) return ORCH_NOT_INITIALISED;
    if (!g_handles.contains_locked(l, ledger_handle)) return ORCH_INVALID;
    ledger_entry* e = nullptr;
    if (const orch_status st = as(l)->add(size, &e); st != ORCH_OK) return st;
    try {
      g_handles.add_locked(e, model_handle, l);
    } catch (...) {
      as(l)->remove(e);
      throw;
    }
    *m = reinterpret_cast<orch_ledger_model*>(e);
    return ORCH_OK;
  });
}
void model_remove(orch_ledger_model* m) {
  auto lock = g_handles.exclusive();
  if (!g_life.up() || !g_handles.contains_locked(m, model_handle)) return;
  g_handles.remove_locked(m);
  as(m)->owner->remove(as(m));
}
orch_status model_set_refcount(orch_ledger_model* m, uint32_t refcount) {
  return with_model(m, [&](ledger& x, ledger_entry* e) { return x.set_refcount(e, refcount); });
}
orch_status model_load(orch_ledger_model* m, double budget, uint64_t* loaded) {
  return with_model(m, [&](ledger& x, ledger_entry* e) { return x.load(e, budget, loaded); });
}
orch_status model_unload(orch_ledger_model* m, uint64_t* freed) {
  return with_model(m, [&](ledger& x, ledger_entry* e) { return x.unload(e, freed); });
}
orch_status model_info(orch_ledger_model* m, orch_ledger_model_info* info) {
  return with_model(m, [&](ledger& x, ledger_entry* e) { return x.info(e, info); });
}
orch_status free_memory(orch_ledger* l, uint64_t bytes, uint64_t* freed) {
  return with_ledger(l, [&](ledger& x) { return x.free_memory(bytes, freed); });
}
orch_status stats(orch_ledger* l, orch_ledger_stats* s) {
  return with_ledger(l, [&](ledger& x) { return x.stats(s); });
}

constexpr orch_ledger_api ledger_api{.struct_size = sizeof(orch_ledger_api),
                                     .reserved0 = 0,
                                     .open = open,
                                     .close = close,
                                     .set_budget = set_budget,
                                     .model_add = model_add,
                                     .model_remove = model_remove,
                                     .model_set_refcount = model_set_refcount,
                                     .model_load = model_load,
                                     .model_unload = model_unload,
                                     .model_info = model_info,
                                     .free_memory = free_memory,
                                     .stats = stats};

// The ledger is the fallback for every level (docs/memory-semantics.md).
constexpr orch_plugin_table table = make_plugin_table(
    {.kind = ORCH_KIND_PAGER,
     .name = plugin_name,
     .backend = plugin_backend,
     .min_level = ORCH_LEVEL_MIN,
     .max_level = ORCH_LEVEL_MAX,
     .capabilities = ORCH_CAP_LEDGER},
    {.init = plugin_init, .shutdown = plugin_shutdown, .ledger_api = &ledger_api});

}  // namespace

ORCH_PLUGIN_QUERY(table)
