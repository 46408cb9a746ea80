// The names gateway_inputs.cpp and gateway_outputs.cpp write into requests to a host: a
// percent-encoded query value or filename*, and a path joined from confined components.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace orch::gateway {

// RFC 3986's percent-encoding of everything but the unreserved characters: for a query's value
// and RFC 5987's filename*.
inline std::string percent_encoded(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}


inline std::string joined(const std::vector<std::string>& components) {
  std::string out;
  for (const auto& c : components) out += (out.empty() ? "" : "/") + c;
  return out;
}

}  // namespace orch::gateway
