#include "orch/runtime/memory_plan.hpp"

#include <spdlog/spdlog.h>

#include "orch/plugins/errc.hpp"
#include "orch/plugins/loader.hpp"
#include "orch/runtime/plugin_probe.hpp"

namespace orch::runtime {

const std::vector<plugins::plugin_entry>& memory_plan::scan(
    const std::vector<std::filesystem::path>& dirs) {
  auto it = scanned_.find(dirs);
  if (it == scanned_.end()) {
    auto report = plugins::scan_directories(dirs);
    // Missing, non-directory and other libraries' paths are the preflight's to report (once,
    // with the deployment's line); a plugin that fails to load is news here.
    for (const auto& skipped : report.skipped) {
      const bool path_problem = skipped.code == plugins::plugin_errc::not_found ||
                                skipped.code == plugins::plugin_errc::not_a_directory ||
                                skipped.code == plugins::plugin_errc::not_plugin_name;
      if (path_problem) {
        spdlog::debug("plugin path {}: {}", skipped.path.string(), skipped.message);
      } else {
        spdlog::warn("plugin {} skipped: {}", skipped.path.string(), skipped.message);
      }
    }
    it = scanned_.emplace(dirs, std::move(report.plugins)).first;
  }
  return it->second;
}

namespace {

// The "runtime below the configured floor" rule: the reason when the host's device runtime is
// older than its backend's [memory.runtime_floor] entry, or cannot be read while one is set (a
// floor that cannot be checked is not met).
std::optional<std::string> runtime_below_floor(const manifests::deployment& d,
                                               const plugins::backend_device* device) {
  const auto floor = d.memory.runtime_floor.find(d.host.device.kind);
  if (floor == d.memory.runtime_floor.end()) return std::nullopt;
  const std::string backend = manifests::to_string(d.host.device.kind);
  const std::string key = "[memory.runtime_floor] " + backend + " = \"" +
                          floor->second.to_string() + "\"";
  if (device == nullptr) return "no " + backend + " device is open to check " + key;
  auto version = device->runtime_version();
  if (!version) return version.err().message + ", so " + key + " is not met";
  const manifests::runtime_version have{version->first, version->second};
  if (have < floor->second) {
    return backend + " runtime " + have.to_string() + " is below the floor " + key;
  }
  return std::nullopt;
}

}  // namespace

const result<std::vector<plugins::plugin_entry>>& memory_plan::probe(
    const std::vector<std::filesystem::path>& dirs) {
  auto it = probed_.find(dirs);
  if (it == probed_.end()) {
    it = probed_.emplace(dirs, probe_plugins(probe_executable_, dirs, probe_timeout_)).first;
  }
  return it->second;
}

memory_plan memory_plan::make(const manifests::deployment& d,
                              const plugins::backend_device* host_device,
                              std::string probe_executable) {
  memory_plan p;
  p.default_dirs_ = d.plugin_paths;
  p.probe_executable_ = std::move(probe_executable);
  p.probe_timeout_ = d.workers.handshake_timeout;
  const auto& found = p.scan(p.default_dirs_);
  p.host_pager_ = runtime::host_pager(found, manifests::to_string(d.host.device.kind));

  plugins::host_manager_inputs in;
  in.flags = d.memory;  // the ComfyUI flags part of [memory]
  in.device = d.host.device.to_string();
  in.device_supports_pager = d.host.device.is_gpu() && p.host_pager_.has_value();
  in.below_floor = runtime_below_floor(d, host_device);
  if (p.host_pager_) {
    // The host's own pager must start: a plugin that cannot is the failed-init rule.
    auto lib = plugins::plugin_library::open(p.host_pager_->path, /*announce=*/false);
    if (!lib) {
      in.init_error = lib.err().message;
    } else if (auto st = (*lib)->init(); !st) {
      in.init_error = st.err().message;
    }
  }
  p.host_manager_ = plugins::resolve_host_manager(in);
  p.host_level_ = p.host_pager_ ? d.host.protocol_level.value_or(p.host_pager_->max_level) : 0;

  // Per device in memory_settings_for: a cpu device has no offload streams, whatever [memory] says.
  p.settings_.streams = static_cast<std::uint32_t>(d.memory.async_offload_streams.value_or(2));
  p.settings_.page_size = d.host.sim.page_size;
  p.settings_.reserve_vram = d.memory.reserve_vram;
  p.settings_.simple_headroom = d.memory.vram_headroom.value_or(256ull << 20);
  p.settings_.pressure_source = 0;
  p.settings_.pinned_memory = !d.memory.disable_pinned_memory;
  p.pager_settings_.simple_headroom = p.settings_.simple_headroom;
  p.pager_settings_.extra_headroom = p.settings_.reserve_vram;
  p.pager_settings_.pressure_source = p.settings_.pressure_source;
  return p;
}

plugins::host_memory_settings memory_plan::memory_settings_for(
    const manifests::device_spec& device) const {
  plugins::host_memory_settings s = settings_;
  if (!device.is_gpu()) s.streams = 0;
  return s;
}

worker_plugin_choice memory_plan::choose_for(
    const std::string& env, const std::vector<std::pair<std::string, std::string>>& env_vars,
    const std::filesystem::path& manifest_dir, const std::string& backend) {
  std::vector<std::filesystem::path> dirs = default_dirs_;
  for (const auto& [name, value] : env_vars) {
    if (name == plugins::plugin_path_variable) {
      dirs = plugins::split_plugin_path(value, manifest_dir);
    }
  }
  const plugins::plugin_entry* host_entry = host_pager_ ? &*host_pager_ : nullptr;
  // The deployment's directories are read in-process (cached since make()); a pack's go through
  // the probe process.
  const std::vector<plugins::plugin_entry>* found = nullptr;
  if (dirs == default_dirs_) {
    found = &scan(dirs);
  } else if (const auto& probed = probe(dirs); probed) {
    found = &*probed;
  } else {
    spdlog::warn("env {}: {}; its worker runs the ledger without the pack's plugins", env,
                 probed.err().message);
    worker_plugin_choice none;
    none.ledger_reason = "the plugins of its ORCH_PLUGIN_PATH could not be read";
    return none;
  }
  auto choice = choose_worker_plugins(*found, backend, host_level_, host_entry, pager_settings_);
  for (const auto& line : dropped_setting_lines(env, choice)) spdlog::info("{}", line);
  if (choice.ledger_reason) {
    spdlog::info("env {}: {}: its worker runs the ledger", env, *choice.ledger_reason);
  }
  return choice;
}

}  // namespace orch::runtime
