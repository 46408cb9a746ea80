// Where an env lives and whether it is usable. A Python env is materialised by comfy-env in the
// workspace (docs/references.md, comfy-env §1.4): <root>/envs/<name>-<abi tag> (before
// ADR-0039) or <root>/envs/<name>_<abi tag> (after), with the interpreter at
// .pixi/envs/default/bin/python (a venv's bin/python is taken too). The deployment's
// [packs.python] names an interpreter ahead of both. A native pack's "env" is its node library.
//
// With the host's stack known, each env directory's env.stamp.json (or, unstamped, the ABI tag
// in its name) says which stack it was built for: one built for another is never launched, and
// one whose derivation identity changed is stale until rebuilt (docs/envs.md).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "orch/manifests/discovery.hpp"
#include "orch/manifests/env_derivation.hpp"
#include "orch/manifests/env_manifest.hpp"
#include "orch/manifests/env_stamp.hpp"
#include "orch/manifests/host_stack.hpp"

namespace orch::manifests {

enum class env_state {
  ok,         // interpreter or native library present
  missing,    // not materialised (or not built)
  broken,     // the directory exists but the interpreter or library is absent
  stale,      // built for another ABI tag (never launched), or from another derivation
  ambiguous,  // several spellings of the env's directory; the one whose stamp matches is used
};

const char* to_string(env_state state) noexcept;

struct env_status {
  env_state state = env_state::missing;
  bool native = false;
  std::filesystem::path path;         // env directory, or the library (found or expected)
  std::filesystem::path interpreter;  // a Python env's bin/python, when found
  std::string python_version;         // "3.11" read off the env, else the manifest's request
  std::string detail;     // for missing/broken/stale/ambiguous: what is wrong, what to run
  bool runnable = false;  // whether a worker may be started in it
  bool named = false;     // its interpreter is the one [packs.python] names (not managed)
  std::string abi_tag;    // what the env was built for: its stamp's, else its name's
  std::optional<env_stamp> stamp;
  std::string stamp_note;  // "unstamped (not verified)", "stamp unreadable: ...", "abi=X verified"
  std::string identity;    // the derivation identity the manifest gives now (empty: not derived)
  std::vector<std::filesystem::path> candidates;  // every directory found for this env
};

struct env_lookup {
  std::filesystem::path workspace_root;              // the deployment's [env] root
  std::vector<std::filesystem::path> library_paths;  // [packs] library_paths
  const std::map<std::string, std::filesystem::path>* python = nullptr;  // [packs.python]
  const host_stack* stack = nullptr;  // the host's; null: stamps and tags are not checked
  target_platform platform{};
  std::filesystem::path deployment{};  // named in the fix lines; empty: "<deployment>"
};

env_status locate_env(const node_dir& dir, const env_manifest& manifest, const env_lookup& lookup);

// The ABI tag an env directory's name carries ("py311-torch2.10-cpu" of "foo_py311-..."), empty
// for the bare name.
std::string tag_in_dir_name(const std::string& dir_name, const std::string& env_name);

struct orphan_env {
  std::filesystem::path path;
  std::string abi_tag;  // its stamp's, else empty
};

// Directories under <root>/envs that no env of `claimed` maps to (claimed holds every
// candidate directory of every discovered env). Directories whose name starts with '.' are
// comfy-orch's own (locks, logs, builds in progress) and are never orphans.
std::vector<orphan_env> find_orphan_envs(const std::filesystem::path& workspace_root,
                                         const std::vector<std::filesystem::path>& claimed);

}  // namespace orch::manifests
