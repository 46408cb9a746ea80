#include "orch/manifests/runtime_version.hpp"

#include <charconv>

namespace orch::manifests {

std::string runtime_version::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

namespace {

std::optional<std::uint32_t> version_part(std::string_view text) {
  std::uint32_t value = 0;
  if (text.empty() || text.size() > 5) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;  // no sign, space or suffix ("12.8.1", "12a")
  }
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value > 0xFFFF) return std::nullopt;
  return value;
}

}  // namespace

std::optional<runtime_version> parse_runtime_version(std::string_view text) {
  const auto dot = text.find('.');
  const auto major = version_part(text.substr(0, dot));
  if (!major) return std::nullopt;
  if (dot == std::string_view::npos) return runtime_version{*major, 0};
  const auto minor = version_part(text.substr(dot + 1));
  if (!minor) return std::nullopt;
  return runtime_version{*major, *minor};
}

}  // namespace orch::manifests
