// memory_plan: the host's memory choices for one run (docs/memory-semantics.md): which manager the
// host runs and why (one stable log line), the protocol level of its own pager, the settings it
// hands every worker, and, per worker, the plugins chosen at the host's level.
//
// A worker's plugins come from the deployment's [plugins] search_paths, or from the directories
// its pack pins with ORCH_PLUGIN_PATH in [env_vars] (a pack env with its own plugin build, as a
// comfy-env env pins its own comfy-aimdo wheel). That is where level adapters and version NOTEs
// arise: the host never assumes a worker has the host's plugin build.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "orch/manifests/deployment.hpp"
#include "orch/plugins/applied_settings.hpp"
#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/memory_manager.hpp"
#include "orch/plugins/registry.hpp"
#include "orch/runtime/plugin_selection.hpp"

namespace orch::runtime {

class memory_plan {
 public:
  // Scans the deployment's plugin directories and resolves the host's manager (its pager
  // plugin is initialised once to prove it starts; a failure selects the ledger). `host_device`
  // is the host's open device (null on cpu without a backend plugin): its runtime version is
  // what [memory.runtime_floor] is checked against.
  // A pack's own plugin directories are read by `probe_executable` (comfy-orch-worker, see
  // plugin_probe.hpp) within the deployment's handshake timeout.
  static memory_plan make(const manifests::deployment& d,
                          const plugins::backend_device* host_device,
                          std::string probe_executable);

  const plugins::manager_choice& host_manager() const { return host_manager_; }
  unsigned host_level() const { return host_level_; }
  // The host's own pager plugin, when its backend has one.
  const std::optional<plugins::plugin_entry>& host_pager() const { return host_pager_; }

  // The plugins for a worker whose pack sets `env_vars`, at the host's level. A relative
  // ORCH_PLUGIN_PATH entry is relative to `manifest_dir` (the env's comfy-env.toml folder); those
  // directories are read by a probe process, never loaded into the host. Each dropped setting is
  // logged, naming `env`. A probe that fails leaves the worker on the ledger with the reason.
  worker_plugin_choice choose_for(const std::string& env,
                                  const std::vector<std::pair<std::string, std::string>>& env_vars,
                                  const std::filesystem::path& manifest_dir,
                                  const std::string& backend);
  // The host's settings as a worker on `device` takes them: a cpu device has no offload streams.
  plugins::host_memory_settings memory_settings_for(const manifests::device_spec& device) const;

 private:
  const std::vector<plugins::plugin_entry>& scan(const std::vector<std::filesystem::path>& dirs);
  // A pack's directories, through the probe process (cached like scan).
  const result<std::vector<plugins::plugin_entry>>& probe(
      const std::vector<std::filesystem::path>& dirs);

  std::vector<std::filesystem::path> default_dirs_;
  std::map<std::vector<std::filesystem::path>, std::vector<plugins::plugin_entry>> scanned_;
  std::map<std::vector<std::filesystem::path>, result<std::vector<plugins::plugin_entry>>> probed_;
  std::string probe_executable_;
  std::chrono::milliseconds probe_timeout_{10'000};
  plugins::manager_choice host_manager_;
  std::optional<plugins::plugin_entry> host_pager_;
  unsigned host_level_ = 0;
  plugins::host_memory_settings settings_;
  pager_settings pager_settings_;
};

}  // namespace orch::runtime
