// The plugin registry: every plugin found in the configured directories, and the problems of
// every file skipped (docs/plugin-abi.md, `comfy-orch plugins [--json]`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::plugins {

struct plugin_entry {
  std::filesystem::path path;
  std::filesystem::path real_path;
  std::string name;
  std::string kind;     // kind_name()
  std::string backend;  // backend_name()
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  uint32_t min_level = 0;
  uint32_t max_level = 0;
  uint64_t capabilities = 0;
};

struct skipped_file {
  std::filesystem::path path;
  std::string code;     // the loader's error code ("not_a_plugin", "abi_mismatch", ...)
  std::string message;  // cause and fix
};

struct registry_report {
  std::vector<std::filesystem::path> directories;
  std::vector<plugin_entry> plugins;  // sorted by kind, backend, name
  std::vector<skipped_file> skipped;  // a missing directory is reported here as "not_found"
};

// Whether a file is named like a plugin: "orch-*.so" or "orch_*.so". Only those are ever loaded
// by a scan: loading runs a library's constructors in the scanning process (the host), so a
// search path that holds other libraries (/lib/x86_64-linux-gnu, libmemusage.so) must not run
// their code there (docs/plugin-abi.md, "Trust boundary").
bool named_like_a_plugin(const std::filesystem::path& file);

// Scans each directory (not recursively) for *.so files named like plugins, loads each with the
// loader to read its table, and unloads it again. Plugins are not initialised. Other *.so files
// are reported as skipped ("not_plugin_name") without being loaded; a path that is not a
// directory is "not_a_directory", a missing one "not_found".
registry_report scan_directories(const std::vector<std::filesystem::path>& directories);
registry_report scan_directories(const std::vector<std::filesystem::path>& directories);

nlohmann::json to_json(const registry_report& report);
// The plugins of a to_json report read back (what a probe process sends the host). Checked as
// the loader checks a table: an entry of another kind, backend, ABI major or level range is an
// error ("bad_plugin_list") naming it, never a plugin.
result<std::vector<plugin_entry>> plugins_from_json(const nlohmann::json& j);
std::string format_table(const registry_report& report);

inline constexpr const char* plugin_path_variable = "ORCH_PLUGIN_PATH";

// A colon-separated directory list; relative entries are taken relative to `base` (kept as
// given when `base` is empty). Empty entries are skipped.
std::vector<std::filesystem::path> split_plugin_path(const std::string& value,
                                                     const std::filesystem::path& base);

// The directories to scan: the explicit ones when given; else $ORCH_PLUGIN_PATH (colon-separated)
// when set; else `fallback` (the build's plugin directory).
std::vector<std::filesystem::path> plugin_directories(
    const std::vector<std::string>& explicit_dirs, const std::filesystem::path& fallback);

}  // namespace orch::plugins
