#include "orch/runtime/preflight.hpp"

#include <system_error>

#include "orch/manifests/units.hpp"
#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/registry.hpp"
#include "orch/process/install_layout.hpp"

namespace orch::runtime {
namespace fs = std::filesystem;

namespace {

manifests::source_position where(const manifests::deployment& d, const std::string& key) {
  const auto it = d.positions.find(key);
  if (it != d.positions.end()) return it->second;
  return {d.file.string(), 0, 0};
}

std::string join(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const auto& p : dirs) out += (out.empty() ? "" : ", ") + p.string();
  return out.empty() ? "(none)" : out;
}

bool holds_a_plugin(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (plugins::named_like_a_plugin(e.path())) return true;
  }
  return false;
}

void check_search_paths(const manifests::deployment& d, manifests::diagnostics& diags) {
  if (d.positions.count("plugins.search_paths") == 0) return;  // not the operator's list
  const auto at = where(d, "plugins.search_paths");
  for (const auto& dir : d.plugin_paths) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      diags.warning(at, "plugins.search_paths", dir.string() + " does not exist",
                    "fix the path (relative paths are relative to the deployment file) or "
                    "remove it");
    } else if (!fs::is_directory(dir, ec)) {
      diags.warning(at, "plugins.search_paths", dir.string() + " is not a directory",
                    "name the directory that holds the orch-*.so plugins");
    } else if (!holds_a_plugin(dir)) {
      diags.warning(at, "plugins.search_paths",
                    dir.string() + " holds no comfy-orch plugin (orch-*.so); nothing in it is "
                                   "loaded",
                    "name the directory the plugins were built or installed into");
    }
  }
}

void check_device(const manifests::deployment& d, manifests::diagnostics& diags) {
  const auto kind = d.host.device.kind;
  if (kind == manifests::device_kind::cpu) return;  // runs without a backend plugin
  const std::string backend = manifests::to_string(kind);
  if (!plugins::find_backend_plugin(backend, d.plugin_paths).empty()) return;
  std::string fix = "add the directory that holds " + plugins::backend_plugin_file(backend) +
                    " to [plugins] search_paths";
  if (kind == manifests::device_kind::cuda) {
    fix += ", or build comfy-orch where the CUDA toolkit headers are installed; device = \"sim\" "
           "runs without a GPU";
  } else if (kind == manifests::device_kind::hip) {
    fix += ", or build comfy-orch with libamdhip64-dev installed; device = \"sim\" runs without "
           "a GPU";
  } else {
    fix += " (the build puts it in its plugins/lib directory)";
  }
  diags.error(where(d, "host.device"), "host.device",
              "device " + d.host.device.to_string() + " needs the " + backend +
                  " backend plugin (" + plugins::backend_plugin_file(backend) +
                  "), found in none of: " + join(d.plugin_paths),
              fix);
}

void check_pool(const manifests::deployment& d, const ipc::memory_readings& readings,
                manifests::diagnostics& diags) {
  if (d.memory.disable_pinned_memory) return;
  const auto budget = ipc::compute_pinned_budget(readings);
  const std::uint64_t pool = d.shm.pinned_pool_size;
  if (pool <= budget.bytes) return;
  diags.error(where(d, "shm.pinned_pool_size"), "shm.pinned_pool_size",
              "pinned_pool_size = " + manifests::format_size(pool) +
                  " is above this machine's pinned budget of " +
                  manifests::format_size(budget.bytes) + " (ComfyUI's formula over " +
                  manifests::format_size(budget.effective_ram) + " of RAM" +
                  (readings.cgroup_limit ? " after the cgroup limit" : "") + ")",
              "use at most pinned_pool_size = \"" + std::to_string(budget.bytes >> 20) +
                  "MiB\", or set [memory] disable_pinned_memory = true");
}

}  // namespace

std::vector<fs::path> deployment_plugin_directories(const manifests::deployment& d) {
  std::vector<std::string> explicit_dirs;
  for (const auto& p : d.plugin_paths) explicit_dirs.push_back(p.string());
  // A deployment that wrote search_paths = [] asked for no directory: still the fallback, as
  // `plugins` does, so that the two commands always read the same directories.
  return plugins::plugin_directories(explicit_dirs,
                                     process::this_install_layout().plugin_directory);
}

std::vector<fs::path> deployment_library_directories(const manifests::deployment& d) {
  if (!d.packs.library_paths.empty()) return d.packs.library_paths;
  return {process::this_install_layout().node_library_directory};
}

void preflight(const manifests::deployment& d, const ipc::memory_readings& readings,
               manifests::diagnostics& diags) {
  check_search_paths(d, diags);
  check_device(d, diags);
  check_pool(d, readings, diags);
}

}  // namespace orch::runtime
