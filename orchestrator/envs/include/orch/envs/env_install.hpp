// env_install: building one env as a transaction (docs/envs.md). Under a lock file per env, the
// env is built in a directory beside its final place, stamped last, and swapped into place with
// one atomic rename (renameat2 RENAME_EXCHANGE), so a failed or killed install leaves the
// previous env as it was, and two installs of one env run one after the other.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "orch/envs/env_backend.hpp"
#include "orch/manifests/host_stack.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::envs {

struct install_request {
  const manifests::env_entry* env = nullptr;
  manifests::host_stack stack;
  manifests::target_platform platform;
  std::filesystem::path workspace_root;
  std::filesystem::path host_python;
  env_backend_kind backend = env_backend_kind::venv;
  std::vector<std::filesystem::path> find_links;
  bool no_index = false;
  bool force = false;  // rebuild an env that is up to date
  std::string orch_version;
};

struct install_outcome {
  enum class kind { built, up_to_date, failed } result = kind::failed;
  std::filesystem::path dir;  // the env's directory
  std::filesystem::path log;  // the backend's output
  std::string message;        // for failed: the cause and the fix
};

// Reports progress lines for one env ("waiting for ...", "creating the env ...").
using install_progress = std::function<void(const std::string&)>;

// The directory comfy-orch builds an env into: the one the env already has when it runs on this
// stack, else <root>/envs/<name>_<abi tag> (ADR-0039's spelling).
std::filesystem::path install_dir_for(const manifests::env_entry& env,
                                      const std::filesystem::path& workspace_root,
                                      const manifests::host_stack& stack);

// Whether the env is built for this stack from this derivation (what install would skip).
bool env_up_to_date(const manifests::env_status& status);

// Why `backend` cannot build the env `derivation` describes (a Python other than the host's, or
// packages only pixi installs), with the fix and envs_errc::needs_pixi's tag; nothing when it
// can. What install_env refuses before it builds, and what `install --dry-run` says of it.
std::optional<std::string> backend_refusal(const manifests::env_entry& env,
                                           const manifests::env_derivation& derivation,
                                           const manifests::host_stack& stack,
                                           env_backend_kind backend);

install_outcome install_env(const install_request& request, const install_progress& progress);

}  // namespace orch::envs
