#include "orch/serve/worker_routes.hpp"

#include <map>
#include <utility>

namespace orch::orchestrator {
namespace {

// Each first segment's env: the first by env name, then by path (the catalogue's order is the
// class name's, "orch.route:<METHOD> <path>"), and the routes that lost it.
struct segment_owners {
  std::map<std::string, std::string> env;
  std::vector<std::string> clashes;
};

segment_owners owners(const host_runtime& host) {
  std::map<std::string, std::map<std::string, std::string>> by_segment;  // segment -> env -> path
  for (const auto& [type, r] : host.catalogue().routes()) {
    if (!r.route.value("aiohttp", false)) continue;
    by_segment[route_first_segment(r.route.value("path", ""))].emplace(r.env, r.route.value("path", ""));
  }
  segment_owners out;
  for (const auto& [segment, envs] : by_segment) {
    out.env[segment] = envs.begin()->first;
    for (auto it = std::next(envs.begin()); it != envs.end(); ++it)
      out.clashes.push_back("route " + it->second + " of env " + it->first +
                            " is not served: env " + envs.begin()->first +
                            " has routes under /" + segment + "/ first; give each pack a prefix "
                            "of its own");
  }
  return out;
}

}  // namespace

std::string route_first_segment(std::string path) {
  if (path.rfind("/api/", 0) == 0) path = path.substr(4);
  if (path.empty() || path[0] != '/') return {};
  const auto end = path.find('/', 1);
  return path.substr(1, end == std::string::npos ? std::string::npos : end - 1);
}

std::set<std::string> worker_route_segments(host_runtime& host) {
  std::set<std::string> out;
  for (const auto& [segment, env] : host.on_io_thread([&] { return owners(host).env; }))
    out.insert(segment);
  return out;
}

std::shared_ptr<forwarded_request> worker_route_for(host_runtime& host, const http_request& req) {
  const std::string segment = route_first_segment(req.path);
  if (segment.empty()) return nullptr;
  return host.on_io_thread([&]() -> std::shared_ptr<forwarded_request> {
    const auto found = owners(host).env;
    const auto it = found.find(segment);
    if (it == found.end()) return nullptr;
    const worker_info* w = host.workers().find(it->second);
    if (w == nullptr || w->web_socket.empty()) return nullptr;
    return std::make_shared<forwarded_request>(
        forwarded_request{w->web_socket.string(), it->second, req});
  });
}

std::vector<std::string> worker_route_clashes(host_runtime& host) {
  return host.on_io_thread([&] { return owners(host).clashes; });
}

}  // namespace orch::orchestrator
