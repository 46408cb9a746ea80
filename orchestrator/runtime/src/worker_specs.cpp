#include "orch/runtime/worker_specs.hpp"

#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "orch/plugins/backend_device.hpp"
#include "orch/process/tool_process.hpp"

namespace orch::runtime {
namespace {

// A pack's [worker] device: the cpu, or a device of the host's own kind (the host shares that
// one, e.g. its sim segment). Anything else cannot be reached from this host: the host's device,
// with a warning that names the env.
manifests::device_spec worker_device(const manifests::deployment& d,
                                     const std::optional<std::string>& pack_device,
                                     const std::string& env) {
  if (!pack_device) return d.host.device;
  const auto spec = manifests::parse_device_spec(*pack_device);
  if (spec && (spec->kind == manifests::device_kind::cpu || spec->kind == d.host.device.kind)) {
    return *spec;
  }
  spdlog::warn(
      "env {}: [worker] device = \"{}\" is not reachable from host device {}; its worker "
      "runs on {}",
      env, *pack_device, d.host.device.to_string(), d.host.device.to_string());
  return d.host.device;
}

// A pager signal the worker will read as on although it is neither true nor false ("maybe",
// control bytes): said once per variable and value, naming the first env it reaches.
void warn_unrecognised_pager_flags(const process::environment& operator_env,
                                   const std::vector<std::pair<std::string, std::string>>& pack,
                                   const std::string& env, std::set<std::string>& warned) {
  for (const char* name : {plugins::worker_pager_variable, plugins::worker_pager_alias}) {
    std::optional<std::string> value;
    for (const auto& [k, v] : pack) {
      if (k == name) value = v;
    }
    if (!value) {
      const auto it = operator_env.find(name);
      if (it != operator_env.end()) value = it->second;
    }
    if (!value) continue;
    const auto warning = plugins::unrecognised_flag_warning(name, *value, "true");
    if (warning && warned.insert(*warning).second) spdlog::warn("env {}: {}", env, *warning);
  }
}

// The pixi.toml of an env whose interpreter is pixi's default environment; empty otherwise.
std::filesystem::path pixi_manifest_of(const manifests::env_status& status) {
  const auto manifest = status.path / "pixi.toml";
  std::error_code ec;
  if (status.interpreter != status.path / ".pixi/envs/default/bin/python" ||
      !std::filesystem::is_regular_file(manifest, ec)) {
    return {};
  }
  return manifest;
}

}  // namespace

planned_workers plan_workers(const manifests::deployment& d, const manifests::inventory& inv,
                             memory_plan& plan, const std::string& host_backend_plugin,
                             bool python_workers, const process::environment& operator_env) {
  planned_workers out;
  std::set<std::string> flag_warnings;
  for (const auto& pack : inv.packs) {
    for (const auto& e : pack.envs) {
      const std::string& name = e.dir.env_name;
      if (!e.status.runnable) {
        out.skipped.push_back(
            {name, std::string(e.status.native ? "native library " : "Python env ") +
                       e.status.path.string() + " is " + manifests::to_string(e.status.state) +
                       ": " + e.status.detail});
        continue;
      }
      if (!e.status.native && !python_workers) {
        out.skipped.push_back({name,
                               "Python pack, and this host was started without "
                               "liborch_worker.so; start it from comfy-orch"});
        continue;
      }
      warn_unrecognised_pager_flags(operator_env, e.manifest.env_vars, name, flag_warnings);
      worker_spec spec;
      spec.env = name;
      if (e.status.native) {
        spec.library = e.status.path;
      } else {
        spec.python = python_worker_spec{e.status.interpreter,
                                         e.dir.config.parent_path(),
                                         e.dir.pack_dir,
                                         d.comfyui_root.value_or(std::filesystem::path()),
                                         {},
                                         {}};
        spec.python->pixi_manifest = pixi_manifest_of(e.status);
        if (!spec.python->pixi_manifest.empty())
          spec.python->pixi = process::find_executable("pixi");
      }
      spec.env_vars = e.manifest.env_vars;
      spec.device = worker_device(d, e.manifest.worker.device, name);
      spec.memory = plan.memory_settings_for(spec.device);
      spec.backend_plugin =
          spec.device.kind == d.host.device.kind
              ? host_backend_plugin
              : plugins::find_backend_plugin(manifests::to_string(spec.device.kind), d.plugin_paths)
                    .string();
      spec.plugins = plan.choose_for(name, spec.env_vars, e.dir.config.parent_path(),
                                     manifests::to_string(spec.device.kind));
      spec.call_timeout = d.workers.call_timeout;
      if (e.manifest.options.call_timeout_s) {
        spec.call_timeout = std::chrono::milliseconds(
            static_cast<std::int64_t>(*e.manifest.options.call_timeout_s * 1000));
      }
      out.specs.push_back(std::move(spec));
    }
  }
  return out;
}

}  // namespace orch::runtime
