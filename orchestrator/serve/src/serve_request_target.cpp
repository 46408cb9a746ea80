// split_target (serve_http.hpp): a request target as the routes read it, path and query
// percent-decoded.
#include <algorithm>
#include <string>
#include <string_view>

#include "orch/serve/serve_http.hpp"

namespace orch::serve {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX and (in a query) '+' decoded; a malformed escape is kept as it is.
std::string url_decode(std::string_view s, bool query) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(query && s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

}  // namespace

std::string percent_decoded(std::string_view text) {
  return url_decode(text, false);
}

void split_target(std::string_view target, http_request& r) {
  const auto q = target.find('?');
  const std::string_view raw = target.substr(0, q);
  r.path = url_decode(raw, false);
  r.segments.clear();
  for (std::size_t at = raw.empty() || raw[0] != '/' ? 0 : 1; at <= raw.size();) {
    const auto slash = std::min(raw.find('/', at), raw.size());
    r.segments.push_back(url_decode(raw.substr(at, slash - at), false));
    at = slash + 1;
  }
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    if (!pair.empty())
      r.query[url_decode(pair.substr(0, eq), true)] =
          eq == std::string_view::npos ? std::string() : url_decode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
}

}  // namespace orch::serve
