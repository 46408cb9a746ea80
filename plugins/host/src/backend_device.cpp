#include "orch/plugins/backend_device.hpp"

#include <unistd.h>

#include <cstddef>

#include "orch/plugins/errc.hpp"
#include "orch/plugins/names.hpp"

namespace orch::plugins {

status check_backend_api(const orch_backend_api& api, const std::string& origin) {
  // ABI 1's entries up to host_unregister; the ones after are appended and optional.
  constexpr auto frozen = offsetof(orch_backend_api, now_ns);
  if (!ORCH_HAS_FIELD(&api, host_unregister)) {
    return error{plugin_errc::invalid_table,
                 origin + ": backend table of " + std::to_string(api.struct_size) +
                     " bytes, below the " + std::to_string(frozen) + " of ABI 1"};
  }
  const std::pair<bool, const char*> required[] = {
      {api.device_count != nullptr, "device_count"},
      {api.device_open != nullptr, "device_open"},
      {api.device_close != nullptr, "device_close"},
      {api.device_total_mem != nullptr, "device_total_mem"},
      {api.granularity != nullptr, "granularity"},
      {api.mem_get_info != nullptr, "mem_get_info"},
      {api.va_reserve != nullptr, "va_reserve"},
      {api.va_free != nullptr, "va_free"},
      {api.phys_create != nullptr, "phys_create"},
      {api.phys_release != nullptr, "phys_release"},
      {api.map != nullptr, "map"},
      {api.unmap != nullptr, "unmap"},
      {api.synchronize != nullptr, "synchronize"},
  };
  for (const auto& [present, name] : required) {
    if (!present) {
      return error{plugin_errc::invalid_table,
                   origin + ": backend table has no " + std::string(name) +
                       "; rebuild the plugin against orch/plugin/backend.h"};
    }
  }
  // host_register and host_unregister come as a pair: a plugin that can lock a range must be
  // able to unlock it.
  if ((api.host_register == nullptr) != (api.host_unregister == nullptr)) {
    return error{plugin_errc::invalid_table,
                 origin +
                     ": backend table has only one of host_register and "
                     "host_unregister"};
  }
  return ok_status();
}

result<std::unique_ptr<backend_device>> backend_device::load(const std::filesystem::path& path) {
  // Debug: the host and every worker open one; `run`'s default output is for the run itself.
  auto lib = plugin_library::open(path, /*announce=*/false);
  if (!lib) return lib.err();
  if ((*lib)->table().kind != ORCH_KIND_BACKEND || (*lib)->table().backend_api == nullptr) {
    return error{plugin_errc::invalid_plugin, path.string() + " is not a backend plugin"};
  }
  if (auto st = check_backend_api(*(*lib)->table().backend_api, path.string()); !st) {
    return st.err();
  }
  if (auto st = (*lib)->init(); !st) return st.err();
  std::unique_ptr<backend_device> d(new backend_device());
  d->library_ = std::move(*lib);
  d->api_ = d->library_->table().backend_api;
  return d;
}

status backend_device::open_device(int ordinal, int sim_fd) {
  orch_device_config config{};
  config.struct_size = sizeof(config);
  config.ordinal = ordinal;
  config.sim_fd = sim_fd;
  if (const orch_status st = api_->device_open(&config, &device_); st != ORCH_OK) {
    device_ = nullptr;
    // The count tells the operator which of the usual causes it is: no driver at all (the
    // backend cannot even count), no such device, or a device that refused to open.
    int32_t count = -1;
    const orch_status counted = api_->device_count(&count);
    std::string why;
    if (counted != ORCH_OK) {
      why = "the " + backend() + " backend cannot reach a driver here (" + status_name(counted) +
            "): is the " + backend() + " driver installed? device = \"sim\" runs without a GPU";
    } else if (ordinal >= count) {
      why = "the " + backend() + " backend sees " + std::to_string(count) +
            " device(s); use an index below that, or device = \"sim\" to run without a GPU";
    } else {
      why = "the device exists but did not open; check that no other process holds it "
            "exclusively";
    }
    return error{plugin_errc::device_open_failed, library_->path().string() + ": opening device " +
                                                      std::to_string(ordinal) + " answered " +
                                                      status_name(st) + ": " + why};
  }
  return ok_status();
}

result<std::unique_ptr<backend_device>> backend_device::open(const std::filesystem::path& path,
                                                             int ordinal, int sim_fd) {
  auto d = load(path);
  if (!d) return d.err();
  if (auto st = (*d)->open_device(ordinal, sim_fd); !st) return st.err();
  return d;
}

result<std::unique_ptr<backend_device>> backend_device::create_sim(
    const std::filesystem::path& path, const orch_sim_config& config, int* fd) {
  auto d = load(path);
  if (!d) return d.err();
  const orch_sim_api* sim = (*d)->sim();
  if (sim == nullptr)
    return error{plugin_errc::invalid_plugin, path.string() + " has no sim controls"};
  int32_t created = -1;
  if (const orch_status st = sim->create(&config, &created); st != ORCH_OK) {
    return error{plugin_errc::sim_failed, std::string("creating the sim device answered ") +
                                              status_name(st) +
                                              "; check [host.sim] capacity and page_size"};
  }
  if (auto st = (*d)->open_device(0, created); !st) {
    ::close(created);
    return st.err();
  }
  *fd = created;
  return d;
}

backend_device::~backend_device() {
  if (device_ != nullptr) api_->device_close(device_);
  library_.reset();
}

std::string backend_device::backend() const {
  return backend_name(library_->table().backend);
}

result<std::pair<std::uint32_t, std::uint32_t>> backend_device::runtime_version() const {
  if (!ORCH_HAS_FIELD(api_, runtime_version) || api_->runtime_version == nullptr) {
    return error{plugin_errc::unsupported, "backend " + backend() + " reports no runtime version"};
  }
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  if (const orch_status st = api_->runtime_version(device_, &major, &minor); st != ORCH_OK) {
    return error{
        plugin_errc::device_error,
        "backend " + backend() + ": reading the runtime version answered " + status_name(st)};
  }
  return std::pair{major, minor};
}

const orch_sim_api* backend_device::sim() const noexcept {
  const orch_plugin_table& t = library_->table();
  if ((t.capabilities & ORCH_CAP_SIM_CONTROL) == 0 || !ORCH_HAS_FIELD(&t, extension))
    return nullptr;
  const auto* sim = static_cast<const orch_sim_api*>(t.extension);
  // The entries of ABI 1.0 (up to counters) or nothing; reclaim_dead was appended.
  return sim != nullptr && ORCH_HAS_FIELD(sim, counters) ? sim : nullptr;
}

std::string backend_plugin_file(const std::string& backend) {
  return "orch-backend-" + backend + ".so";
}

std::filesystem::path find_backend_plugin(const std::string& backend,
                                          const std::vector<std::filesystem::path>& dirs) {
  const std::string file = backend_plugin_file(backend);
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / file, ec)) return dir / file;
  }
  return {};
}

}  // namespace orch::plugins
