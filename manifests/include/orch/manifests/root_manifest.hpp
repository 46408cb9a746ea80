// comfy-env-root.toml: the pack-level file (docs/references.md, comfy-env §2.1). It never names
// an env. Both eras are read: [node_reqs] + [settings] (Aug-18) and [node_packs] (0.4.25+),
// with [types] in both. Legacy sections from before 2026-08 are accepted with a warning.
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

// Another node pack to install next to this one: `Name = "owner/repo"` (or a URL), or a table
// {github|repo, tag|branch|commit} / {registry, version}.
struct node_requirement {
  std::string name;
  std::string section;                        // "node_reqs" or "node_packs": which era wrote it
  std::optional<std::string> source;          // the string form
  std::map<std::string, std::string> fields;  // the table form, values as strings
};

enum class socket_kind { builtin, custom };

struct root_manifest {
  std::filesystem::path file;
  std::vector<node_requirement> requirements;
  std::vector<std::pair<std::string, std::string>> settings;  // booleans as "1"/"0"
  std::map<std::string, socket_kind> types;
  // Legacy root [env_vars] (before 2026-08): applied to every worker of the pack, under the
  // env file's own [env_vars].
  std::vector<std::pair<std::string, std::string>> legacy_env_vars;
};

root_manifest parse_root_manifest(const toml::table& root, const std::filesystem::path& file,
                                  diagnostics& diags);

std::optional<root_manifest> load_root_manifest(const std::filesystem::path& file,
                                                diagnostics& diags);

}  // namespace orch::manifests
