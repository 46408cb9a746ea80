// Diagnostics for user-written files: every error or warning names the file, line and column,
// the key, what was expected, and how to fix it (docs/errors.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orch::manifests {

enum class severity { error, warning, note };

const char* to_string(severity s) noexcept;

struct source_position {
  std::string file;          // as given by the caller (not resolved)
  std::uint32_t line = 0;    // 1-based; 0 when the file as a whole is meant
  std::uint32_t column = 0;  // 1-based; 0 when unknown
};

struct diagnostic {
  severity level = severity::error;
  source_position where;
  std::string key;      // dotted key path such as "host.sim.capacity", or a section "[apt]"
  std::string message;  // what is wrong or what comfy-orch does with it
  std::string fix;      // what the user should do; may be empty for notes

  // "file:line:col: error: key: message (fix: ...)" on one line, greppable.
  std::string format() const;
};

// The diagnostics collected while reading one or more files.
class diagnostics {
 public:
  void add(diagnostic d) { items_.push_back(std::move(d)); }
  void error(source_position where, std::string key, std::string message, std::string fix);
  void warning(source_position where, std::string key, std::string message, std::string fix = {});
  void note(source_position where, std::string key, std::string message);

  bool has_errors() const noexcept;
  std::size_t count(severity s) const noexcept;
  const std::vector<diagnostic>& items() const noexcept { return items_; }
  void append(const diagnostics& other);

 private:
  std::vector<diagnostic> items_;
};

}  // namespace orch::manifests
