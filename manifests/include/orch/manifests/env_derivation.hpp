// What an env is built from: its manifest resolved against the host stack, as comfy-env's rules
// derive it (docs/references.md, comfy-env §1.5; docs/envs.md). One derivation gives the
// pixi.toml (pixi backend), the requirement lines (uv and venv backends) and the identity that
// decides whether an existing env is stale. The identity hashes the derivation's output, not the
// file's bytes, so comments and [env_vars] never make an env stale (comfy-env's "identity v2").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "orch/manifests/env_manifest.hpp"
#include "orch/manifests/host_stack.hpp"

namespace orch::manifests {

struct target_platform {
  std::string pixi = "linux-64";  // pixi's platform name
  std::string glibc;              // "2.36"; empty: no [system-requirements] libc floor
};

// The platform this binary runs on, with the C library's version.
target_platform this_platform();

struct env_derivation {
  std::string env_name;
  std::string python;         // the env's Python minor: the manifest's, else the host's
  toml::table pixi_manifest;  // the whole generated pixi.toml
  // PEP 508 lines for pip and uv: the pack's PyPI dependencies for this platform and its [cuda]
  // wheels. The torch family is not among them: a uv or venv env sees the host's own torch
  // through --system-site-packages, which is by construction the host's ABI.
  std::vector<std::string> requirements;
  std::vector<std::string> conda_packages;  // the pack's conda packages; only pixi installs them
  std::vector<std::string> notes;           // one line per rewrite (a torch entry dropped, ...)
  std::vector<std::string> untranslatable;  // PyPI entries pip cannot take, with the reason
  std::string identity;                     // "orch1:<sha256>"
};

// `config_dir` resolves path dependencies. Pure: reads nothing but its arguments.
env_derivation derive_env(const std::string& env_name, const env_manifest& manifest,
                          const host_stack& stack, const target_platform& platform,
                          const std::filesystem::path& config_dir);

// The pixi.toml text, with a header naming the comfy-env.toml it came from.
std::string pixi_toml_text(const env_derivation& derivation, const std::filesystem::path& source);

// requirements.txt text for uv and pip, one requirement per line.
std::string requirements_text(const env_derivation& derivation);

}  // namespace orch::manifests
