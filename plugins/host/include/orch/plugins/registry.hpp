// The plugin registry: every plugin found in the configured directories, and the problems of
// every file skipped (DESIGN.md §4.4, `comfy-orch plugins [--json]`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// Scans each directory (not recursively) for *.so files, loads each with the loader to read its
// table, and unloads it again. Plugins are not initialised.
registry_report scan_directories(const std::vector<std::filesystem::path>& directories);

nlohmann::json to_json(const registry_report& report);
std::string format_table(const registry_report& report);

}  // namespace orch::plugins
