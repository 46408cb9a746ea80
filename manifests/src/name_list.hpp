// Fixed lists of section and key names, as the manifest parsers classify them.
#pragma once

#include <array>
#include <string_view>

namespace orch::manifests::detail {

template <std::size_t N>
using name_list = std::array<std::string_view, N>;

template <std::size_t N>
constexpr bool contains(const name_list<N>& names, std::string_view key) {
  for (auto n : names) {
    if (n == key) return true;
  }
  return false;
}

}  // namespace orch::manifests::detail
