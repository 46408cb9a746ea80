// A deployment's packs, their bound node directories, manifests and env states: what
// `comfy-orch envs` prints and what the runtime starts workers from.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/discovery.hpp"
#include "orch/manifests/env_manifest.hpp"
#include "orch/manifests/env_workspace.hpp"
#include "orch/manifests/root_manifest.hpp"

namespace orch::manifests {

struct env_entry {
  node_dir dir;
  env_manifest manifest;
  env_status status;
};

struct pack_entry {
  pack_layout layout;
  std::optional<root_manifest> root;
  std::vector<env_entry> envs;
};

struct inventory {
  std::vector<pack_entry> packs;

  std::size_t env_count() const;
};

// Reads every pack of the deployment: explicit [packs] paths first, then the packs found in
// [packs] custom_nodes (a pack listed both ways is read once). Manifest problems and env-name
// collisions go to `diags`; a node directory whose manifest has an error is left out. With the
// host's stack, env stamps and ABI tags are checked (env_workspace.hpp).
inventory build_inventory(const deployment& d, diagnostics& diags,
                          const host_stack* stack = nullptr);

// Every env directory a discovered env maps to, in every spelling (what is not an orphan).
std::vector<std::filesystem::path> claimed_env_dirs(const inventory& inv);

}  // namespace orch::manifests
