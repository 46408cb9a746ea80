// The plugin loader (docs/plugin-abi.md): dlopen(RTLD_NOW | RTLD_LOCAL), one entry symbol, a
// validated table, an idempotent lifecycle.
//
// Errors a user can cause are told apart by orch::error::code, each message naming the file and
// the fix (docs/errors.md):
//   "not_found"     the file does not exist;
//   "load_failed"   dlopen refused it (not an ELF object, missing dependency; dlerror() quoted);
//   "not_a_plugin"  it loads but exports no orch_plugin_query;
//   "abi_mismatch"  it answers NULL to every ABI major this host loads, or a table of a major
//                   it has no adapter for (abi_adapters.hpp);
//   "invalid_table" a short struct_size, a bad level range, a missing init/shutdown/kind table,
//                   or a kind table shorter than ABI 1's entries;
//   "unsupported_plugin" well formed, but a kind, backend or level above L4 this host does not
//                   know yet: built for a newer host, skipped.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "orch/plugin/plugin.h"
#include "orch/support/result.hpp"

namespace orch::plugins {

class plugin_library {
 public:
  // Loads and validates; logs the real path (info level, or debug when !announce: a registry
  // scan only reads tables).
  static result<std::unique_ptr<plugin_library>> open(const std::filesystem::path& path,
                                                      bool announce = true);

  plugin_library(const plugin_library&) = delete;
  plugin_library& operator=(const plugin_library&) = delete;
  ~plugin_library();  // shutdown() then dlclose

  const orch_plugin_table& table() const noexcept { return *table_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  const std::filesystem::path& real_path() const noexcept { return real_path_; }
  // Another exported symbol (the allocator's orch_torch_malloc / orch_torch_free), or nullptr.
  void* symbol(const char* name) const noexcept;

  // Idempotent: a second call is OK and changes nothing. host may be nullptr (default_host
  // services are then used). A failed init leaves the plugin down.
  status init(const orch_host_services* host = nullptr);
  void shutdown() noexcept;  // idempotent
  bool initialised() const noexcept { return initialised_; }

 private:
  plugin_library(void* handle, const orch_plugin_table* table, std::filesystem::path path,
                 std::filesystem::path real_path) noexcept;

  void* handle_;
  const orch_plugin_table* table_;
  std::filesystem::path path_;
  std::filesystem::path real_path_;
  bool initialised_ = false;
};

// Checks a table as the loader does; exposed for tests. `origin` names the file in messages.
status validate_table(const orch_plugin_table* table, const std::string& origin);

}  // namespace orch::plugins
