// Where an env lives and whether it is usable. A Python env is materialised by comfy-env in the
// workspace (docs/references.md, comfy-env §1.4): <root>/envs/<name>-<abi tag> (before
// ADR-0039) or <root>/envs/<name>_<abi tag> (after), with the interpreter at
// .pixi/envs/default/bin/python. A native pack's "env" is its node library.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "orch/manifests/discovery.hpp"
#include "orch/manifests/env_manifest.hpp"

namespace orch::manifests {

enum class env_state {
  ok,       // interpreter or native library present
  missing,  // not materialised (or not built)
  broken,   // the directory exists but the interpreter or library is absent
};

const char* to_string(env_state state) noexcept;

struct env_status {
  env_state state = env_state::missing;
  bool native = false;
  std::filesystem::path path;  // env directory, or the library (found or expected)
  std::string python_version;  // "3.11" read off the env, else the manifest's request
  std::string detail;          // for missing/broken: what is absent and what to run
};

struct env_lookup {
  std::filesystem::path workspace_root;              // the deployment's [env] root
  std::vector<std::filesystem::path> library_paths;  // [packs] library_paths
};

env_status locate_env(const node_dir& dir, const env_manifest& manifest, const env_lookup& lookup);

}  // namespace orch::manifests
