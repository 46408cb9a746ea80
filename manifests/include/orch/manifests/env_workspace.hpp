// Where an env lives and whether it is usable. A Python env is materialised by comfy-env in the
// workspace (docs/references.md, comfy-env §1.4): <root>/envs/<name>-<abi tag> (before
// ADR-0039) or <root>/envs/<name>_<abi tag> (after), with the interpreter at
// .pixi/envs/default/bin/python (a venv's bin/python is taken too). The deployment's
// [packs.python] names an interpreter ahead of both. A native pack's "env" is its node library.
#pragma once

#include <filesystem>
#include <map>
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
  std::filesystem::path interpreter;  // a Python env's bin/python, when found
  std::string python_version;  // "3.11" read off the env, else the manifest's request
  std::string detail;          // for missing/broken: what is absent and what to run
};

struct env_lookup {
  std::filesystem::path workspace_root;              // the deployment's [env] root
  std::vector<std::filesystem::path> library_paths;  // [packs] library_paths
  const std::map<std::string, std::filesystem::path>* python = nullptr;  // [packs.python]
};

env_status locate_env(const node_dir& dir, const env_manifest& manifest, const env_lookup& lookup);

}  // namespace orch::manifests
