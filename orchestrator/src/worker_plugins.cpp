#include "orch/orchestrator/worker_plugins.hpp"

#include "orch/plugins/loader.hpp"

namespace orch::orchestrator {
namespace {

std::filesystem::path find_plugin(const std::string& file,
                                  const std::vector<std::filesystem::path>& dirs) {
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / file, ec)) return dir / file;
  }
  return {};
}

}  // namespace

worker_plugin_choice choose_worker_plugins(const manifests::device_spec& device,
                                           const std::vector<std::filesystem::path>& plugin_dirs) {
  worker_plugin_choice c;
  const std::string backend = manifests::to_string(device.kind);
  c.pager = find_plugin("orch-pager-" + backend + ".so", plugin_dirs);
  if (c.pager.empty()) {
    c.manager = "none";
    c.reason = "no pager plugin for backend " + backend;
    return c;
  }
  // The level is read off the plugin's own table, never off a version string (§4.5).
  auto lib = plugins::plugin_library::open(c.pager, /*announce=*/false);
  if (!lib) {
    c.pager.clear();
    c.manager = "none";
    c.reason = "pager plugin unusable: " + lib.err().message;
    return c;
  }
  c.level = (*lib)->table().max_level;
  c.allocator = find_plugin("orch-allocator-" + backend + ".so", plugin_dirs);
  c.manager = "pager";
  c.reason = "the host's " + backend + " pager at level L" + std::to_string(c.level);
  return c;
}

}  // namespace orch::orchestrator
