#include "orch/manifests/units.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace orch::manifests {
namespace {

// Splits "1.5GiB" into 1.5 and "GiB". The number must be a plain non-negative decimal.
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
  std::size_t i = 0;
  bool digits = false;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) {
    digits = digits || text[i] != '.';
    ++i;
  }
  if (!digits) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc{} || ptr != text.data() + i) return std::nullopt;
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::make_pair(value, unit);
}

// The bytes a size names, before the range check: parse_size and size_overflows read one table.
std::optional<double> size_in_bytes(std::string_view text) {
  const auto parts = split_number(text);
  if (!parts) return std::nullopt;
  const auto [value, unit] = *parts;
  static constexpr std::pair<std::string_view, double> units[] = {
      {"B", 1.0},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
  };
  for (const auto& [name, factor] : units) {
    if (unit == name) return std::round(value * factor);
  }
  // Zero is zero in every unit ("0", as docs/deployment.md writes reserve_vram); any other number
  // without one stays an error: ComfyUI's --reserve-vram counts GB, a byte count here would not.
  if (unit.empty() && value == 0) return 0.0;
  return std::nullopt;
}

constexpr double two_to_the_64 = 18446744073709551616.0;

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  const auto bytes = size_in_bytes(text);
  if (!bytes || !(*bytes < two_to_the_64)) return std::nullopt;
  return static_cast<std::uint64_t>(*bytes);
}

bool size_overflows(std::string_view text) {
  const auto bytes = size_in_bytes(text);
  return bytes && !(*bytes < two_to_the_64);
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  const auto parts = split_number(text);
  if (!parts) return std::nullopt;
  const auto [value, unit] = *parts;
  double ms = 0;
  if (unit == "ms") {
    ms = value;
  } else if (unit == "s") {
    ms = value * 1e3;
  } else if (unit == "m") {
    ms = value * 60e3;
  } else if (unit == "h") {
    ms = value * 3600e3;
  } else {
    return std::nullopt;
  }
  if (!(ms < 1e15)) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(names)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[48];
  if (unit == 0 || value == std::floor(value)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", value, names[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", value, names[unit]);
  }
  return buf;
}

}  // namespace orch::manifests
