#include "orch/manifests/inventory.hpp"

#include <filesystem>
#include <set>

namespace orch::manifests {
namespace fs = std::filesystem;

std::size_t inventory::env_count() const {
  std::size_t n = 0;
  for (const auto& p : packs) n += p.envs.size();
  return n;
}

namespace {

std::vector<fs::path> deployment_pack_dirs(const deployment& d) {
  std::vector<fs::path> dirs = d.packs.paths;
  if (d.packs.custom_nodes) {
    for (auto& p : list_custom_nodes(*d.packs.custom_nodes)) dirs.push_back(std::move(p));
  }
  std::set<fs::path> seen;
  std::vector<fs::path> unique;
  for (auto& dir : dirs) {
    std::error_code ec;
    auto key = fs::weakly_canonical(dir, ec);
    if (ec) key = dir;
    if (seen.insert(key).second) unique.push_back(std::move(dir));
  }
  return unique;
}

}  // namespace

inventory build_inventory(const deployment& d, diagnostics& diags, const host_stack* stack) {
  inventory inv;
  std::vector<pack_layout> layouts;
  for (const auto& dir : deployment_pack_dirs(d)) layouts.push_back(discover_pack(dir, diags));
  check_env_name_collisions(layouts, diags);

  // What the fix lines name: the deployment file, or for a ComfyUI host's deployment, which is
  // text with no file (comfyui_deployment.hpp), its tree: `comfy-orch install <root>` runs.
  std::error_code ec;
  const bool has_file = std::filesystem::is_regular_file(d.file, ec);
  const env_lookup lookup{d.env.root,
                          d.packs.library_paths,
                          &d.packs.python,
                          stack,
                          this_platform(),
                          has_file || !d.comfyui_root ? d.file : *d.comfyui_root};
  for (auto& layout : layouts) {
    pack_entry pack;
    if (layout.root_manifest) pack.root = load_root_manifest(*layout.root_manifest, diags);
    for (const auto& dir : layout.node_dirs) {
      diagnostics local;
      auto manifest = load_env_manifest(dir.config, local);
      diags.append(local);
      if (!manifest || local.has_errors()) continue;
      env_status status = locate_env(dir, *manifest, lookup);
      pack.envs.push_back({dir, std::move(*manifest), std::move(status)});
    }
    pack.layout = std::move(layout);
    inv.packs.push_back(std::move(pack));
  }
  return inv;
}

std::vector<std::filesystem::path> claimed_env_dirs(const inventory& inv) {
  std::vector<std::filesystem::path> out;
  for (const auto& pack : inv.packs) {
    for (const auto& e : pack.envs) {
      out.insert(out.end(), e.status.candidates.begin(), e.status.candidates.end());
    }
  }
  return out;
}

}  // namespace orch::manifests
