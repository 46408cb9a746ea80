// GET /system_stats (ComfyUI's shape): the machine, the device as the workers' pagers see it,
// and comfy-orch's memory table as orch_processes.
#include <sys/utsname.h>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/runtime/memory_table.hpp"
#include "orch/serve/serve_api.hpp"

namespace orch::serve {
namespace {

using nlohmann::json;

std::uint64_t meminfo_bytes(const std::string& key) {
  const auto bytes = ipc::read_meminfo("/", key);
  return bytes ? *bytes : 0;
}

}  // namespace

http_reply comfy_api::system_stats() {
  utsname u{};
  ::uname(&u);
  const auto rows = host_.on_io_thread([&] { return runtime::read_memory_table(host_); });
  const auto& dev = host_.deployment().host.device;
  // The host opens no device itself: the device is as its workers' pagers see it.
  const auto [total, free_bytes] = runtime::device_figures_of(rows);
  json devices = json::array();
  devices.push_back({{"name", dev.to_string()},
                     {"type", manifests::to_string(dev.kind)},
                     {"index", dev.index},
                     {"vram_total", total},
                     {"vram_free", free_bytes},
                     {"torch_vram_total", total},
                     {"torch_vram_free", free_bytes}});
  const manifests::host_stack stack = identity_.stack.value_or(manifests::host_stack{});
  const json stats = {{"system",
                      {{"os", "linux"},  // sys.platform (Comfy-Org/ComfyUI 002c3fb9)
                       {"ram_total", meminfo_bytes("MemTotal")},
                       {"ram_free", meminfo_bytes("MemAvailable")},
                       {"comfyui_version", "comfy-orch " + identity_.version},
                       {"required_frontend_version", ""},
                       {"python_version", stack.version},
                       {"pytorch_version", stack.torch},
                       {"embedded_python", false},
                       {"argv", json::array({"comfy-orch", "serve"})},
                       {"kernel", std::string(u.release)}}},
                     {"devices", devices},
                     {"orch_processes", to_json(rows)}};
  return {200, "application/json", stats.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace orch::serve
