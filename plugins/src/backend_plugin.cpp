// Entry point of the backend plugins (cpu, sim, cuda, hip): one source, the backend chosen at
// compile time by ORCH_PLUGIN_BACKEND_*. The table is static and only orch_plugin_query is
// exported (plugins/exports/plugin.map).
#include <mutex>
#include <type_traits>

#include "backends/backends.hpp"
#include "common/handle_registry.hpp"
#include "common/host_link.hpp"
#include "common/plugin_entry.hpp"

namespace {

using namespace orch::plugin_detail;

#if defined(ORCH_PLUGIN_BACKEND_SIM)
constexpr const char* plugin_name = "sim-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_SIM;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_SIM_CONTROL;
const char* driver_summary() { return nullptr; }
const orch_backend_api* backend() { return sim_backend_api(); }
const void* extension() { return sim_control_api(); }
#elif defined(ORCH_PLUGIN_BACKEND_CPU)
constexpr const char* plugin_name = "cpu-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CPU;
constexpr uint64_t plugin_caps = 0;
const char* driver_summary() { return nullptr; }
const orch_backend_api* backend() { return cpu_backend_api(); }
const void* extension() { return nullptr; }
#elif defined(ORCH_PLUGIN_BACKEND_CUDA)
constexpr const char* plugin_name = "cuda-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CUDA;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_HOST_REGISTER;
const orch_backend_api* backend() { return cuda_backend_api(); }
const void* extension() { return nullptr; }
const char* driver_summary() { return cuda_driver_summary(); }
#elif defined(ORCH_PLUGIN_BACKEND_HIP)
constexpr const char* plugin_name = "hip-backend";
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_HIP;
constexpr uint64_t plugin_caps = ORCH_CAP_VMM | ORCH_CAP_HOST_REGISTER;
const orch_backend_api* backend() { return hip_backend_api(); }
const void* extension() { return nullptr; }
const char* driver_summary() { return hip_runtime_summary(); }
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
  return init_plugin(g_life, g_host, host);
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

// The driver a GPU backend found, or why it found none it can use: said once, when a caller
// first asks for devices (info when usable, a warning naming what is needed when not).
void announce_driver(orch_status st) {
  static std::once_flag once;
  const char* summary = driver_summary();
  if (summary == nullptr) return;
  std::call_once(once, [&] {
    g_host.log(st == ORCH_OK ? ORCH_LOG_INFO : ORCH_LOG_WARN, "%s", summary);
  });
}

orch_status device_count(int32_t* count) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  const orch_status st = backend()->device_count(count);
  announce_driver(st);
  return st;
}

orch_status device_open_unguarded(const orch_device_config* config, orch_device** out) {
  if (out == nullptr) return ORCH_INVALID;
  auto lock = g_handles.exclusive();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  orch_device* d = nullptr;
  const orch_status opened = backend()->device_open(config, &d);
  announce_driver(opened);
  if (opened != ORCH_OK) return opened;
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

// The backend's own table with every entry it provides behind the gates above. An entry it
// leaves NULL ("unsupported") stays NULL; one past the end of its struct_size is absent too.
const orch_backend_api& gated_backend() {
  using B = orch_backend_api;
  static const B& raw = *backend();
  const auto gate = [](auto entry, auto gated) { return entry != nullptr ? gated : nullptr; };
  static const B api{
      .struct_size = raw.struct_size,
      .reserved0 = 0,
      .device_count = device_count,
      .device_open = device_open,
      .device_close = device_close,
      .device_total_mem = ORCH_GATE_DEVICE(B, device_total_mem),
      .granularity = ORCH_GATE_DEVICE(B, granularity),
      .mem_get_info = ORCH_GATE_DEVICE(B, mem_get_info),
      .va_reserve = ORCH_GATE_DEVICE(B, va_reserve),
      .va_free = ORCH_GATE_DEVICE(B, va_free),
      .phys_create = ORCH_GATE_DEVICE(B, phys_create),
      .phys_release = ORCH_GATE_DEVICE(B, phys_release),
      .map = ORCH_GATE_DEVICE(B, map),
      .unmap = ORCH_GATE_DEVICE(B, unmap),
      .synchronize = ORCH_GATE_DEVICE(B, synchronize),
      .host_register = gate(raw.host_register, ORCH_GATE_DEVICE(B, host_register)),
      .host_unregister = gate(raw.host_unregister, ORCH_GATE_DEVICE(B, host_unregister)),
      .now_ns = gate(raw.now_ns, ORCH_GATE_DEVICE(B, now_ns)),
      .host_pointer = gate(raw.host_pointer, ORCH_GATE_DEVICE(B, host_pointer)),
      .runtime_version = ORCH_HAS_FIELD(&raw, runtime_version)
                             ? gate(raw.runtime_version, ORCH_GATE_DEVICE(B, runtime_version))
                             : nullptr};
  return api;
}

const void* gated_extension() {
#if defined(ORCH_PLUGIN_BACKEND_SIM)
  using S = orch_sim_api;
  static const S api{.struct_size = sim_control_api()->struct_size,
                     .reserved0 = 0,
                     .create = ORCH_GATE_UP(S, create),
                     .set_other_usage = ORCH_GATE_DEVICE(S, set_other_usage),
                     .inject_fault = ORCH_GATE_DEVICE(S, inject_fault),
                     .set_clock = ORCH_GATE_DEVICE(S, set_clock),
                     .advance_clock = ORCH_GATE_DEVICE(S, advance_clock),
                     .set_process_budget = ORCH_GATE_DEVICE(S, set_process_budget),
                     .counters = ORCH_GATE_DEVICE(S, counters),
                     .reclaim_dead = ORCH_GATE_DEVICE(S, reclaim_dead)};
  return &api;
#else
  return extension();
#endif
}

#undef ORCH_GATE_DEVICE
#undef ORCH_GATE_UP

const orch_plugin_table& table() {
  static const orch_plugin_table t = make_plugin_table(
      {.kind = ORCH_KIND_BACKEND,
       .name = plugin_name,
       .backend = plugin_backend,
       .min_level = ORCH_LEVEL_1,
       .max_level = ORCH_LEVEL_4,
       .capabilities = plugin_caps},
      {.init = plugin_init,
       .shutdown = plugin_shutdown,
       .backend_api = &gated_backend(),
       .extension = gated_extension()});
  return t;
}

}  // namespace

ORCH_PLUGIN_QUERY(table())
