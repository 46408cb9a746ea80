#include "orch/manifests/diagnostic.hpp"

#include <algorithm>

namespace orch::manifests {

const char* to_string(severity s) noexcept {
  switch (s) {
    case severity::error:
      return "error";
    case severity::warning:
      return "warning";
    case severity::note:
      return "note";
  }
  return "error";
}

std::string diagnostic::format() const {
  std::string out = where.file;
  if (where.line != 0) {
    out += ":" + std::to_string(where.line);
    if (where.column != 0) out += ":" + std::to_string(where.column);
  }
  out += ": ";
  out += to_string(level);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  if (!fix.empty()) out += " (fix: " + fix + ")";
  return out;
}

void diagnostics::error(source_position where, std::string key, std::string message,
                        std::string fix) {
  items_.push_back(
      {severity::error, std::move(where), std::move(key), std::move(message), std::move(fix)});
}

void diagnostics::warning(source_position where, std::string key, std::string message,
                          std::string fix) {
  items_.push_back(
      {severity::warning, std::move(where), std::move(key), std::move(message), std::move(fix)});
}

void diagnostics::note(source_position where, std::string key, std::string message) {
  items_.push_back({severity::note, std::move(where), std::move(key), std::move(message), {}});
}

bool diagnostics::has_errors() const noexcept {
  return count(severity::error) != 0;
}

std::size_t diagnostics::count(severity s) const noexcept {
  return static_cast<std::size_t>(std::count_if(items_.begin(), items_.end(),
                                                [s](const diagnostic& d) { return d.level == s; }));
}

void diagnostics::append(const diagnostics& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

}  // namespace orch::manifests
