// Entry point of the backend plugins (cpu, sim, cuda, hip): one source, the backend chosen at
// compile time by ORCH_PLUGIN_BACKEND_*. The table is static and only orch_plugin_query is
// exported (plugins/exports/plugin.map).
#include "backends/backends.hpp"
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

orch_status plugin_init(const orch_host_services* host) {
  if (const orch_status st = g_life.begin_init(); st != ORCH_OK) return st;
  g_host.attach(host);
  g_life.finish_init(true);
  return ORCH_OK;
}

void plugin_shutdown() {
  if (g_life.begin_shutdown()) g_host.detach();
}

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
    x.backend_api = backend();
    x.extension = extension();
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
