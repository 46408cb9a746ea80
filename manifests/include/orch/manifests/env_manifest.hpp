// comfy-env.toml: one isolated node directory's environment (docs/references.md,
// comfy-env §2.2), plus comfy-orch's own [worker] table for native packs.
//
// Every era found in the wild is accepted: sections from earlier or later layouts are kept or
// ignored with a warning that says which, and only what would break the environment is an error.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests {

struct env_options {
  std::optional<double> health_check_timeout_s;  // comfy-env default 5.0 when absent
  std::optional<double> call_timeout_s;          // comfy-env ADR-0018 default 600 when absent
};

// comfy-orch's [worker] table: a native pack names its node library (docs/manifests.md).
struct worker_table {
  std::optional<std::string> library;  // bare file name (searched) or a path relative to the file
  std::optional<std::string> device;   // overrides the host device: cpu, sim, cuda:N, hip:N
};

struct env_manifest {
  std::filesystem::path file;
  int schema = 1;
  std::optional<std::string> python;       // "3.11"; always a string
  std::vector<std::string> cuda_packages;  // a scalar is normalised to a one-item list
  std::vector<std::pair<std::string, std::string>> env_vars;  // file order; values as strings
  env_options options;
  worker_table worker;
  // Tables handed to the environment builder verbatim (dependencies, pypi-dependencies, target,
  // workspace.channels, activation, pypi-options, system-requirements, tasks), each serialised
  // back to TOML text. Keyed by top-level name.
  std::map<std::string, std::string> passthrough;

  bool is_native() const { return worker.library.has_value(); }
};

// Parses an already-loaded table. Problems go to `diags`; the result is meaningful only when no
// error was added.
env_manifest parse_env_manifest(const toml::table& root, const std::filesystem::path& file,
                                diagnostics& diags);

// Loads and parses a file; nullopt on a TOML syntax error or an unreadable file.
std::optional<env_manifest> load_env_manifest(const std::filesystem::path& file,
                                              diagnostics& diags);

}  // namespace orch::manifests
