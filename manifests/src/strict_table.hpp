// Strict, typed reading of one TOML table of a deployment: each accessor checks the type and
// range of one key and records it as known; finish() reports every key nobody asked for, with a
// "did you mean" suggestion, so a typo is an error rather than a silently ignored setting.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests::detail {

class strict_table {
 public:
  // `table` may be null (the section is absent): every accessor then returns nullopt.
  strict_table(const toml::table* table, std::string prefix, std::string file, diagnostics& diags,
               const toml::node* parent = nullptr);

  std::optional<std::string> string(const std::string& key);
  std::optional<bool> boolean(const std::string& key);
  std::optional<std::int64_t> integer(const std::string& key, std::int64_t min, std::int64_t max);
  std::optional<std::uint64_t> size(const std::string& key);                  // bytes or "8GiB"
  std::optional<std::chrono::milliseconds> duration(const std::string& key);  // s or "250ms"
  std::optional<std::vector<std::string>> string_list(const std::string& key);
  // A sub-table; an error when the key exists with another type. Null when absent.
  const toml::table* table(const std::string& key);

  // Errors for every key not asked for.
  void finish();

  source_position where(const std::string& key) const;
  void error(const std::string& key, std::string message, std::string fix);

 private:
  const toml::node* get(const std::string& key);
  void type_error(const std::string& key, const toml::node& node, const std::string& expected,
                  std::string fix);

  const toml::table* table_;
  std::string prefix_;
  std::string file_;
  diagnostics& diags_;
  const toml::node* parent_;
  std::set<std::string> known_;
};

}  // namespace orch::manifests::detail
