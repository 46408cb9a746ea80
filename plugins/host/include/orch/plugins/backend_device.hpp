// backend_device: one device opened through a backend plugin, owned for as long as a process
// needs it (docs/plugin-abi.md). The host opens one before it makes the pinned pool and each worker
// opens one before it maps the pool, so both register the pool's segments with the same driver
// that later copies from them (backend_pin_registrar.hpp).
//
// The plugin file is found by its conventional name, orch-backend-<backend>.so, in the search
// paths, the same rule as every other plugin (docs/plugin-abi.md).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "orch/plugin/backend.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"
#include "orch/support/result.hpp"

namespace orch::plugins {

class backend_device {
 public:
  // Loads and initialises the plugin at `path`, then opens device `ordinal` (sim: the device
  // segment `sim_fd`, which the plugin dups). Errors name the file and the step that failed.
  static result<std::unique_ptr<backend_device>> open(const std::filesystem::path& path,
                                                      int ordinal, int sim_fd);
  // sim only: creates a new device segment through the plugin's controls, then opens it. The
  // segment's fd goes to *fd (owned by the caller, passed to every worker).
  static result<std::unique_ptr<backend_device>> create_sim(const std::filesystem::path& path,
                                                            const orch_sim_config& config,
                                                            int* fd);
  backend_device(const backend_device&) = delete;
  backend_device& operator=(const backend_device&) = delete;
  ~backend_device();  // device_close, then the plugin is shut down and unloaded

  const orch_backend_api& api() const noexcept { return *api_; }
  orch_device* device() const noexcept { return device_; }
  plugin_library& library() noexcept { return *library_; }
  // The backend's name in its table ("cpu", "sim", "cuda", "hip").
  std::string backend() const;
  // The device runtime's {major, minor} (orch_backend_api.runtime_version); an error when the
  // backend has none (cpu, or a plugin built before the entry was appended) or the call fails.
  result<std::pair<std::uint32_t, std::uint32_t>> runtime_version() const;
  // sim only: the device controls (counters, faults); nullptr on other backends.
  const orch_sim_api* sim() const noexcept;

 private:
  backend_device() = default;
  static result<std::unique_ptr<backend_device>> load(const std::filesystem::path& path);
  status open_device(int ordinal, int sim_fd);
  std::unique_ptr<plugin_library> library_;
  const orch_backend_api* api_ = nullptr;
  orch_device* device_ = nullptr;
};

// A backend table a device can be opened through: the size of ABI 1 and every entry that is not
// optional (host_register/host_unregister may both be NULL: nothing to page-lock).
status check_backend_api(const orch_backend_api& api, const std::string& origin);

// The conventional file name of a backend's plugin: "orch-backend-<backend>.so".
std::string backend_plugin_file(const std::string& backend);
// That file in the first of `dirs` that holds it, or an empty path.
std::filesystem::path find_backend_plugin(const std::string& backend,
                                          const std::vector<std::filesystem::path>& dirs);

}  // namespace orch::plugins
