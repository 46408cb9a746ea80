// Entry point of the backend plugins (cpu, sim, cuda, hip): one source, the backend chosen at
// compile time by ORCH_PLUGIN_BACKEND_*. The table is static and only orch_plugin_query is
// exported (plugins/exports/plugin.map).
#include <type_traits>

#include "backends/backends.hpp"
#include "common/handle_registry.hpp"
#include "common/host_link.hpp"

namespace {

using namespace orch::plugin_detail;

#if defined(ORCH_PLUGIN_BACKEND_SIM)
constexpr const char* plugin_name = "sim-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_SIM;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_SIM_CONTROL;
const orch_backend_api* backend() { return sim_backend_api(); }
const void* extension() { return sim_control_api(); }
#elif defined(ORCH_PLUGIN_BACKEND_CPU)
constexpr const char* plugin_name = "cpu-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CPU;
constexpr uint64_t plugin_caps = 0;
const orch_backend_api* backend() { return cpu_backend_api(); }
const void* extension() { return nullptr; }
#elif defined(ORCH_PLUGIN_BACKEND_CUDA)
constexpr const char* plugin_name = "cuda-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CUDA;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_HOST_REGISTER;
const orch_backend_api* backend() { return cuda_backend_api(); }
const void* extension() { return nullptr; }
#elif defined(ORCH_PLUGIN_BACKEND_HIP)
constexpr const char* plugin_name = "hip-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_HIP;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_HOST_REGISTER;
const orch_backend_api* backend() { return hip_backend_api(); }
const void* extension() { return nullptr; }
#else
#error "define one ORCH_PLUGIN_BACKEND_*"
#endif

host_link g_host{plugin_name};
lifecycle g_life;
// Devices opened through this plugin's table. Every call checks its device here first, so a
// device used after device_close or shutdown is refused instead of dereferenced, and nothing
// answers while the plugin is down (docs/plugin-abi.md "Lifecycle").
handle_registry g_handles;
constexpr uint32_t device_handle = 1;

orch_status plugin_init(const orch_host_services* host) {
  if (const orch_status st = g_life.begin_init(); st != ORCH_OK) return st;
  g_host.attach(host);
  g_life.finish_init(true);
  return ORCH_OK;
}

void plugin_shutdown() {
  if (!g_life.begin_shutdown()) return;
  auto lock = g_handles.exclusive();  // waits for calls in flight
  g_handles.for_each_locked(device_handle, [](const void* d) {
    backend()->device_close(const_cast<orch_device*>(static_cast<const orch_device*>(d)));
  });
  g_handles.clear_locked();
  g_host.detach();
}

// What a refused call answers, by return type: the status, or "nothing" for the entries that
// return a value (now_ns 0, host_pointer NULL).
template <typename R>
R refused(orch_status st) {
  if constexpr (std::is_same_v<R, orch_status>) return st;
  else if constexpr (!std::is_void_v<R>) return R{};
}

template <typename T>
const T* inner();
template <>
const orch_backend_api* inner<orch_backend_api>() { return backend(); }
#if defined(ORCH_PLUGIN_BACKEND_SIM)
template <>
const orch_sim_api* inner<orch_sim_api>() { return static_cast<const orch_sim_api*>(extension()); }
#endif

// An entry taking a device: runs the backend's own entry only for a live device.
template <auto M, typename T, typename R, typename... A>
R device_call(orch_device* d, A... a) {
  const handle_registry::use use(g_handles, g_life, d, device_handle);
  if (!use) return refused<R>(use.status());
  return (inner<T>()->*M)(d, a...);
}
template <auto M, typename T, typename R, typename... A>
constexpr auto gate_device(R (*T::*)(orch_device*, A...)) -> R (*)(orch_device*, A...) {
  return &device_call<M, T, R, A...>;
}

// An entry without a device (device_count, sim create): runs only while the plugin is up.
template <auto M, typename T, typename... A>
orch_status up_call(A... a) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  return (inner<T>()->*M)(a...);
}
template <auto M, typename T, typename... A>
constexpr auto gate_up(orch_status (*T::*)(A...)) -> orch_status (*)(A...) {
  return &up_call<M, T, A...>;
}

#define ORCH_GATE_DEVICE(T, field) gate_device<&T::field>(&T::field)
#define ORCH_GATE_UP(T, field) gate_up<&T::field>(&T::field)

orch_status device_open_unguarded(const orch_device_config* config, orch_device** out) {
  if (out == nullptr) return ORCH_INVALID;
  auto lock = g_handles.exclusive();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  orch_device* d = nullptr;
  if (const orch_status st = backend()->device_open(config, &d); st != ORCH_OK) return st;
  try {
    g_handles.add_locked(d, device_handle);
  } catch (...) {
    backend()->device_close(d);
    throw;
  }
  *out = d;
  return ORCH_OK;
}

orch_status device_open(const orch_device_config* config, orch_device** out) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  return guarded([&] { return device_open_unguarded(config, out); });
}

void device_close(orch_device* d) {
  auto lock = g_handles.exclusive();
  if (!g_life.up() || !g_handles.remove_locked(d)) return;
  backend()->device_close(d);
}

const orch_backend_api& gated_backend() {
  static const orch_backend_api api = [] {
    using B = orch_backend_api;
    B a = *backend();  // size, version and any entry left NULL ("unsupported") as they are
    a.device_count = ORCH_GATE_UP(B, device_count);
    a.device_open = device_open;
    a.device_close = device_close;
    a.device_total_mem = ORCH_GATE_DEVICE(B, device_total_mem);
    a.granularity = ORCH_GATE_DEVICE(B, granularity);
    a.mem_get_info = ORCH_GATE_DEVICE(B, mem_get_info);
    a.va_reserve = ORCH_GATE_DEVICE(B, va_reserve);
    a.va_free = ORCH_GATE_DEVICE(B, va_free);
    a.phys_create = ORCH_GATE_DEVICE(B, phys_create);
    a.phys_release = ORCH_GATE_DEVICE(B, phys_release);
    a.map = ORCH_GATE_DEVICE(B, map);
    a.unmap = ORCH_GATE_DEVICE(B, unmap);
    a.synchronize = ORCH_GATE_DEVICE(B, synchronize);
    if (a.host_register != nullptr) a.host_register = ORCH_GATE_DEVICE(B, host_register);
    if (a.host_unregister != nullptr) a.host_unregister = ORCH_GATE_DEVICE(B, host_unregister);
    if (a.now_ns != nullptr) a.now_ns = ORCH_GATE_DEVICE(B, now_ns);
    if (a.host_pointer != nullptr) a.host_pointer = ORCH_GATE_DEVICE(B, host_pointer);
    if (a.runtime_version != nullptr) a.runtime_version = ORCH_GATE_DEVICE(B, runtime_version);
    return a;
  }();
  return api;
}

const void* gated_extension() {
#if defined(ORCH_PLUGIN_BACKEND_SIM)
  static const orch_sim_api api = [] {
    using S = orch_sim_api;
    S a = *sim_control_api();
    a.create = ORCH_GATE_UP(S, create);
    a.set_other_usage = ORCH_GATE_DEVICE(S, set_other_usage);
    a.inject_fault = ORCH_GATE_DEVICE(S, inject_fault);
    a.set_clock = ORCH_GATE_DEVICE(S, set_clock);
    a.advance_clock = ORCH_GATE_DEVICE(S, advance_clock);
    a.set_process_budget = ORCH_GATE_DEVICE(S, set_process_budget);
    a.counters = ORCH_GATE_DEVICE(S, counters);
    a.reclaim_dead = ORCH_GATE_DEVICE(S, reclaim_dead);
    return a;
  }();
  return &api;
#else
  return extension();
#endif
}

#undef ORCH_GATE_DEVICE
#undef ORCH_GATE_UP

const orch_plugin_table& table() {
  static const orch_plugin_table t = [] {
    orch_plugin_table x{};
    x.struct_size = sizeof x;
    x.abi_major = ORCH_PLUGIN_ABI_MAJOR;
    x.abi_minor = ORCH_PLUGIN_ABI_MINOR;
    x.kind = ORCH_KIND_BACKEND;
    x.name = plugin_name;
    x.version = ORCH_PLUGIN_VERSION;
    x.backend = plugin_backend;
    x.min_level = ORCH_LEVEL_1;
    x.max_level = ORCH_LEVEL_4;
    x.capabilities = plugin_caps;
    x.init = plugin_init;
    x.shutdown = plugin_shutdown;
    x.backend_api = &gated_backend();
    x.extension = gated_extension();
    return x;
  }();
  return t;
}

}  // namespace

extern "C" ORCH_PLUGIN_EXPORT const orch_plugin_table* orch_plugin_query(uint32_t host_major,
                                                                          uint32_t /*minor*/) {
  // Always answer: the loader compares abi_major itself, so it can name an ABI mismatch.
  (void)host_major;
  return &table();
}
