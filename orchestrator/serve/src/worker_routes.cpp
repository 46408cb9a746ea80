#include "orch/serve/worker_routes.hpp"

#include <algorithm>
#include <map>

namespace orch::serve {

std::vector<worker_route> worker_routes_of(runtime::host_runtime& host) {
  return host.on_io_thread([&] {
    std::vector<worker_route> out;
    for (const auto& [type, r] : host.catalogue().routes()) {
      if (!r.route.value("aiohttp", false)) continue;
      worker_route w;
      w.env = r.env;
      w.path = r.route.value("path", "");
      const auto variable = w.path.find('{');
      w.literal = w.path.substr(0, variable);
      w.exact = variable == std::string::npos;
      out.push_back(std::move(w));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const worker_route& a, const worker_route& b) { return a.env < b.env; });
    return out;
  });
}

std::optional<std::string> env_answering(const std::vector<worker_route>& routes,
                                         const std::string& path) {
  const std::string p = path.rfind("/api/", 0) == 0 ? path.substr(4) : path;
  const worker_route* best = nullptr;
  for (const auto& r : routes) {
    const bool answers = r.exact ? p == r.literal : p.rfind(r.literal, 0) == 0;
    // The longest literal part is the most specific; on a tie the first env keeps it.
    if (answers && (best == nullptr || r.literal.size() > best->literal.size())) best = &r;
  }
  if (best == nullptr) return std::nullopt;
  return best->env;
}

std::shared_ptr<forwarded_request> worker_route_for(runtime::host_runtime& host,
                                                    const http_request& req) {
  // One turn of the io thread per request: every request serve's own routes do not answer (the
  // page's files among them) asks here.
  auto [socket, named] = host.on_io_thread([&]() -> std::pair<std::string, std::string> {
    const auto env = env_answering(worker_routes_of(host), req.path);
    if (!env) return {};
    const runtime::worker_info* w = host.workers().find(*env);
    const runtime::worker_spec* spec = host.workers().spec_of(*env);
    // Its env and its pack, for what the 502 says when the worker does not answer.
    std::string said = *env;
    if (spec != nullptr && spec->python)
      said += " (pack " + spec->python->pack_dir.filename().string() + ")";
    return {w == nullptr ? std::string() : w->web_socket.string(), said};
  });
  if (socket.empty()) return nullptr;
  return std::make_shared<forwarded_request>(forwarded_request{socket, named, req});
}

std::vector<std::string> worker_route_clashes(const std::vector<worker_route>& routes) {
  std::map<std::pair<std::string, bool>, std::string> first;  // (literal, exact) -> env
  std::vector<std::string> out;
  for (const auto& r : routes) {
    const auto [it, fresh] = first.emplace(std::make_pair(r.literal, r.exact), r.env);
    if (!fresh && it->second != r.env)
      out.push_back("route " + r.path + " of env " + r.env + " is not served: env " +
                    it->second + " has a route at " + r.literal +
                    " first; give each pack a prefix of its own");
  }
  return out;
}

}  // namespace orch::serve
