// Which node directories of a pack get an env, by comfy-env's discovery rules
// (docs/references.md, comfy-env §1.4; docs/manifests.md): only <pack>/nodes/comfy-env.toml and
// <pack>/nodes/<child>/comfy-env.toml with <child> not starting with '.' or '_'.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests {

inline constexpr const char* env_manifest_name = "comfy-env.toml";
inline constexpr const char* root_manifest_name = "comfy-env-root.toml";

struct node_dir {
  std::filesystem::path pack_dir;      // as given (never symlink-resolved: its name is the env's)
  std::filesystem::path config;        // <pack>/nodes[/<child>]/comfy-env.toml
  std::filesystem::path relative_dir;  // "nodes" or "nodes/<child>"
  std::string env_name;
};

struct pack_layout {
  std::filesystem::path dir;
  std::string name;                                    // the directory's own name
  std::optional<std::filesystem::path> root_manifest;  // comfy-env-root.toml, if present
  std::vector<node_dir> node_dirs;                     // sorted by relative_dir
};

// Finds the bound node directories of one pack. A pack-root comfy-env.toml, which current
// comfy-env neither discovers nor binds, gets a warning.
pack_layout discover_pack(const std::filesystem::path& pack_dir, diagnostics& diags);

// The pack directories inside a custom_nodes directory, sorted by name. Skips names starting
// with '.' or '_' and names ending in ".disabled" or "._disabled", as comfy-env's install does.
std::vector<std::filesystem::path> list_custom_nodes(const std::filesystem::path& custom_nodes);

// Two node directories deriving the same env name would share one environment: an error naming
// both (comfy-env raises "... BOTH ..." at install).
void check_env_name_collisions(const std::vector<pack_layout>& packs, diagnostics& diags);

}  // namespace orch::manifests
