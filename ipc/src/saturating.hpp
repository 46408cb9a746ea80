// saturating: unsigned arithmetic that clamps instead of wrapping, for sizes read from places we
// do not control (/proc, /sys). A clamped result stays ordered (a huge reading stays huge) where a
// wrapped one would turn a huge reading into a tiny one.
#pragma once

#include <cstdint>
#include <limits>

namespace orch::ipc::detail {

constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return a > std::numeric_limits<std::uint64_t>::max() - b
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

constexpr std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
  return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b
             ? std::numeric_limits<std::uint64_t>::max()
             : a * b;
}

// a − b, or 0 when b > a.
constexpr std::uint64_t floored_sub(std::uint64_t a, std::uint64_t b) noexcept {
  return a > b ? a - b : 0;
}

}  // namespace orch::ipc::detail
