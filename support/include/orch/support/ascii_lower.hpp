// ASCII lower case, for names that protocols compare without case (HTTP header and form field
// names, origins, package names, flag words); bytes past ASCII stay as they are, whatever the
// locale.
#pragma once

#include <string>
#include <string_view>

namespace orch {

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace orch
