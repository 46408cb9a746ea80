#include "orch/serve/frontend_routes.hpp"

#include <utility>

#include "orch/serve/json_reply.hpp"

namespace orch::serve {

using nlohmann::json;

namespace {

// The route's segments without ComfyUI's /api prefix.
std::vector<std::string> api_route(const http_request& req) {
  std::vector<std::string> route = req.segments;
  if (route.size() > 1 && route[0] == "api") route.erase(route.begin());
  return route;
}

}  // namespace

json server_feature_flags(std::size_t max_upload) {
  return {{"supports_preview_metadata", true}, {"max_upload_size", max_upload}};
}

std::optional<http_reply> frontend_routes::handle(const http_request& req) const {
  const auto route = api_route(req);
  if (auto answer = users_.handle(req, route)) return answer;
  if (req.method != "GET") return std::nullopt;
  // ComfyUI's /templates route comes before its web root's files.
  if (auto answer = templates_.handle(req)) return answer;
  if (auto answer = api(route)) return answer;
  // The frontend's own files: never under /api.
  if (!req.segments.empty() && req.segments[0] == "api") return std::nullopt;
  return files_.get(req.path);
}

std::optional<http_reply> frontend_routes::api(const std::vector<std::string>& route) const {
  // ComfyUI's answer for a folder it does not have.
  const http_reply not_found{404, "text/plain; charset=utf-8", ""};
  if (route.empty()) return std::nullopt;
  const std::string& head = route[0];
  const std::size_t n = route.size();
  if (n == 1) {
    if (head == "extensions") return json_reply(files_.extensions());
    if (head == "embeddings" || head == "models") return json_reply(json::array());
    if (head == "i18n" || head == "global_subgraphs" || head == "node_replacements")
      return json_reply(json::object());
    if (head == "features") return json_reply(server_feature_flags(max_upload_));
  }
  if (n == 2 && (head == "models" || head == "view_metadata" || head == "global_subgraphs"))
    return not_found;
  if (head == "experiment" && n >= 2 && route[1] == "models")
    return n == 2 ? json_reply(json::array()) : not_found;
  if (head == "internal" && n == 2) {
    if (route[1] == "logs") return json_reply("");
    if (route[1] == "folder_paths") return json_reply(json::object());
  }
  if (head == "internal" && n == 3 && route[1] == "logs" && route[2] == "raw")
    return json_reply({{"entries", json::array()}, {"size", {{"cols", 80}, {"rows", 24}}}});
  return std::nullopt;
}

}  // namespace orch::serve
