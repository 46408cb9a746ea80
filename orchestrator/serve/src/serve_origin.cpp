#include "orch/serve/serve_origin.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

#include "orch/support/ascii_lower.hpp"

namespace orch::serve {
namespace {

// "host[:port]" or "[v6]:port" (lower-cased) as its host, brackets dropped and a name's
// trailing dots too ("localhost." is localhost: a browser resolves it so), and its port.
struct host_port {
  std::string host;
  std::string port;  // empty: none
};

std::string without_trailing_dots(std::string host) {
  while (!host.empty() && host.back() == '.') host.pop_back();
  return host;
}

host_port split(std::string_view s) {
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos) return {std::string(s.substr(1)), {}};
    const bool port = close + 1 < s.size() && s[close + 1] == ':';
    return {std::string(s.substr(1, close - 1)),
            port ? std::string(s.substr(close + 2)) : std::string()};
  }
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || s.find(':') != colon)
    return {without_trailing_dots(std::string(s)), {}};
  return {without_trailing_dots(std::string(s.substr(0, colon))), std::string(s.substr(colon + 1))};
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" ||
      (host.size() > 10 && host.compare(host.size() - 10, 10, ".localhost") == 0))
    return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace

bool cross_origin_refused(std::string_view host_header, std::string_view origin_header) {
  if (host_header.empty() || origin_header.empty()) return false;
  const host_port h = split(ascii_lower(host_header));
  if (!is_loopback(h.host)) return false;
  const std::string origin = ascii_lower(origin_header);
  if (origin == "null") return true;
  // scheme://[userinfo@]netloc[/path...]: the netloc, and its host without userinfo.
  const auto start = origin.find("//");
  std::string netloc;
  if (start != std::string::npos) {
    netloc = origin.substr(start + 2);
    netloc = netloc.substr(0, netloc.find_first_of("/?#"));
  }
  const auto at = netloc.rfind('@');
  const host_port o = split(at == std::string::npos ? netloc : netloc.substr(at + 1));
  if (h.host.empty() || o.host.empty()) return false;
  // As ComfyUI: a side without a port is compared by host alone.
  if (h.port.empty() || o.port.empty()) return h.host != o.host;
  return h.host != o.host || h.port != o.port;
}

}  // namespace orch::serve
