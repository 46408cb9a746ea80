// The official frontend's routes at the gateway (docs/fleet.md, "The frontend at the gateway"):
// serve's frontend_routes over the gateway's own frontend, user directory and official templates,
// so a user's settings and workflows stay at the one address the user opens. What depends on the
// packs is a host's: every host of the fleet carries the same packs (its fingerprint), so any
// host that is up answers for all: the packs' web files under /extensions/<pack>/, the packs'
// example workflows (/workflow_templates), and the packs' own aiohttp routes (whatever no route
// of the gateway answers). GET /extensions lists the frontend's own core extensions (the
// gateway's, which must match the page it served) then the packs' (the host's list, less its
// core ones).
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/serve/json_reply.hpp"

namespace orch::gateway {

using nlohmann::json;
using serve::http_reply;
using serve::http_request;
using serve::json_reply;

namespace {

// What the gateway takes of a host's /extensions: a frontend loads each entry as a script, so
// the list is capped in count and in each entry's length, and each must be a path under
// /extensions/.
constexpr std::size_t max_extensions = 10000;
constexpr std::size_t max_extension_path = 1024;

// ComfyUI's own routes, which never belong to a pack: a request for one that the gateway does
// not answer is a 404 here, never a host's (an output's /view is the gateway's, not a host's).
bool comfyui_route(const std::string& head) {
  static const std::set<std::string> own = {"view",    "upload", "ws",     "prompt",
                                            "queue",   "history", "orch",   "interrupt",
                                            "free",    "object_info", "system_stats",
                                            "jobs",    "metrics"};
  return own.contains(head);
}

// A host's Content-Type, if it is one a header may carry: printable ASCII, not too long.
std::string content_type_of(const std::string& sent) {
  if (sent.empty() || sent.size() > 200) return "application/octet-stream";
  for (const char c : sent)
    if (c < 0x20 || c > 0x7e) return "application/octet-stream";
  return sent;
}

// The first segment after /extensions/ of an extension's URL ("core" of /extensions/core/x.js).
std::string extension_owner(const std::string& url) {
  const std::string prefix = "/extensions/";
  if (url.rfind(prefix, 0) != 0) return {};
  const auto slash = url.find('/', prefix.size());
  return url.substr(prefix.size(), slash == std::string::npos ? std::string::npos
                                                              : slash - prefix.size());
}

}  // namespace

void gateway_api::add_frontend_routes(serve::route_table& table) {
  using request = const http_request&;
  table.add({.method = "POST", .path = "/free", .answer = [this](request r) { return free(r); }});
  table.add({.method = "GET", .path = "/system_stats", .answer = [this](request) {
               return system_stats();
             }});
  table.add_fallback([this](request r) { return jobs(r); });
  table.add_fallback([this](request r) -> std::optional<http_reply> {
    std::vector<std::string> route = r.segments;
    if (route.size() > 1 && route[0] == "api") route.erase(route.begin());
    if (r.method != "GET" || route.empty()) return std::nullopt;
    if (route[0] == "extensions") {
      if (route.size() == 1) return extensions_list();
      // The frontend's own (the gateway's, as the page it served: a directory of its
      // extensions/); any other, a pack's.
      std::error_code ec;
      if (options_.frontend_root &&
          std::filesystem::is_directory(*options_.frontend_root / "extensions" / route[1], ec))
        return std::nullopt;  // frontend_routes serves it
      return proxied("GET", r.target.empty() ? r.path : r.target);
    }
    if (route[0] == "workflow_templates")
      return proxied("GET", r.target.empty() ? r.path : r.target);
    return std::nullopt;
  });
  table.add_fallback([this](request r) { return web_.handle(r); });
  table.add_fallback([this](request r) { return pack_route(r); });
}

std::optional<http_reply> gateway_api::pack_route(const http_request& req) {
  // A pack's aiohttp route, as serve forwards it to its worker: here, to a host. GET and POST
  // (with a JSON body) only: what host_link sends.
  if (req.method != "GET" && req.method != "POST") return std::nullopt;
  std::vector<std::string> route = req.segments;
  if (route.size() > 1 && route[0] == "api") route.erase(route.begin());
  if (route.empty() || route[0].empty() || comfyui_route(route[0])) return std::nullopt;
  return proxied(req.method, req.target.empty() ? req.path : req.target, req.body);
}

http_reply gateway_api::extensions_list() {
  http_reply later;
  later.later = [this]() -> http_reply {
    json own = own_files_.extensions();
    std::set<std::string> own_owners;
    for (const auto& url : own) own_owners.insert(extension_owner(url.get<std::string>()));
    const auto hosts = answering_hosts();
    if (hosts.empty()) {
      spdlog::warn("gateway: GET /extensions: no host is up; the packs' scripts are not listed");
      return json_reply(own);
    }
    host_link link(io_, hosts.front().second.first, hosts.front().second.second, options_.secret);
    auto answer = request_and_wait(link, "GET", "/extensions");
    const std::string& name = hosts.front().first;
    if (!answer) return json_reply({{"error", name + ": " + answer.err().message}}, 502);
    if (answer->status != 200)
      return json_reply({{"error", name + ": GET /extensions answered HTTP " +
                                       std::to_string(answer->status)}},
                        502);
    auto listed = executor::parse_bounded_json(answer->body);
    if (!listed || !listed->is_array() || listed->size() > max_extensions)
      return json_reply({{"error", name + ": GET /extensions answered no list of at most " +
                                       std::to_string(max_extensions) + " paths"}},
                        502);
    for (const auto& url : *listed) {
      if (!url.is_string() || url.get_ref<const std::string&>().size() > max_extension_path)
        return json_reply({{"error", name + ": GET /extensions listed an entry that is no path "
                                            "of at most 1024 bytes"}},
                          502);
      const std::string owner = extension_owner(url.get<std::string>());
      if (owner.empty())
        return json_reply({{"error", name + ": GET /extensions listed a path outside "
                                            "/extensions/"}},
                          502);
      if (!own_owners.contains(owner)) own.push_back(url);
    }
    return json_reply(own);
  };
  return later;
}

std::vector<std::pair<std::string, std::pair<std::string, std::uint16_t>>>
gateway_api::answering_hosts() {
  return on_io([&] {
    std::vector<std::pair<std::string, std::pair<std::string, std::uint16_t>>> out;
    for (auto& [name, h] : hosts_)
      if (h.view.up && h.refusal.empty() && h.link)
        out.emplace_back(name, std::pair(h.link->address(), h.link->port()));
    return out;
  });
}

http_reply gateway_api::proxied(std::string method, std::string target, std::string body) {
  http_reply later;
  later.later = [this, method = std::move(method), target = std::move(target),
                 body = std::move(body)]() -> http_reply {
    const auto hosts = answering_hosts();
    if (hosts.empty())
      return json_reply({{"error", "no host of the fleet is up to answer " + method + " " +
                                       serve::route_path(target.substr(0, target.find('?')))}},
                        503);
    // Through a link of its own, with no stream (the host's may be replaced meanwhile).
    host_link link(io_, hosts.front().second.first, hosts.front().second.second, options_.secret);
    auto answer = request_and_wait(link, method, target, body);
    if (!answer)
      return json_reply({{"error", hosts.front().first + ": " + answer.err().message}}, 502);
    if (answer->status < 100 || answer->status > 599)
      return json_reply({{"error", hosts.front().first + ": answered HTTP " +
                                       std::to_string(answer->status)}},
                        502);
    return {answer->status, content_type_of(answer->content_type), std::move(answer->body)};
  };
  return later;
}

}  // namespace orch::gateway
