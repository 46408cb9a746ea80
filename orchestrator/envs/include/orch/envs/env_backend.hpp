// env_backend: how one env is materialised by pixi, uv or a plain venv (docs/envs.md). Each
// backend builds into the directory it is given, from one derivation (env_derivation.hpp), and
// writes its tools' output to the install's log. The transaction around it (lock, build
// directory, stamp, rename) is env_install's.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "orch/manifests/env_derivation.hpp"
#include "orch/support/result.hpp"

namespace orch::envs {

enum class env_backend_kind { pixi, uv, venv };

const char* to_string(env_backend_kind kind) noexcept;

// The backend to use: the one asked for ("pixi", "uv", "venv"), else the first installed in that
// order. Errors: "invalid_request" (an unknown name), "not_found" (the one asked for, or none,
// is installed; the message says how to get one).
result<env_backend_kind> choose_backend(const std::string& requested,
                                        const std::filesystem::path& host_python);

struct backend_build {
  env_backend_kind kind = env_backend_kind::venv;
  std::filesystem::path host_python;
  std::filesystem::path dir;  // the build directory, created and empty
  std::vector<std::filesystem::path> find_links;
  bool no_index = false;
  int log_fd = -1;
  std::string env_name;
  std::filesystem::path source;  // the comfy-env.toml, for the pixi.toml header
  // The host's torch version: uv and pip install under the constraint torch==<it>, so no
  // requirement can replace the host's torch inside the env. Empty: the host has none.
  std::string host_torch;
};

// Reports each phase as it starts ("creating venv", "installing 3 requirements (pip)").
using phase_reporter = std::function<void(const std::string&)>;

// Errors: "install_failed", with the message naming the failing package where the tool's
// output says which, and the tool's own error line.
status build_env(const backend_build& build, const manifests::env_derivation& derivation,
                 const phase_reporter& phase);

// The interpreter a backend's env has (relative to its directory).
std::filesystem::path interpreter_in(env_backend_kind kind);

}  // namespace orch::envs
