#include "orch/serve/frontend_routes.hpp"

#include <utility>

namespace orch::orchestrator {

using nlohmann::json;

namespace {

http_reply json_answer(const json& body, unsigned status = 200) {
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

// The route's segments without ComfyUI's /api prefix.
std::vector<std::string> api_route(const http_request& req) {
  std::vector<std::string> route = req.segments;
  if (route.size() > 1 && route[0] == "api") route.erase(route.begin());
  return route;
}

}  // namespace

json server_feature_flags(std::size_t max_upload) {
  return {{"supports_preview_metadata", false}, {"max_upload_size", max_upload}};
}

std::optional<http_reply> frontend_routes::handle(const http_request& req) const {
  const auto route = api_route(req);
  if (auto answer = users_.handle(req, route)) return answer;
  if (req.method != "GET") return std::nullopt;
  if (auto answer = api(req, route)) return answer;
  // The frontend's own files: never under /api.
  if (!req.segments.empty() && req.segments[0] == "api") return std::nullopt;
  return files_.get(req.path);
}

std::optional<http_reply> frontend_routes::api(const http_request&,
                                               const std::vector<std::string>& route) const {
  if (route.empty()) return std::nullopt;
  const std::string& head = route[0];
  const std::size_t n = route.size();
  if (n == 1) {
    if (head == "extensions") return json_answer(files_.extensions());
    if (head == "embeddings" || head == "models") return json_answer(json::array());
    if (head == "i18n" || head == "global_subgraphs" || head == "node_replacements" ||
        head == "workflow_templates")
      return json_answer(json::object());
    if (head == "features") return json_answer(server_feature_flags(max_upload_));
  }
  // Folders serve does not have: ComfyUI's answer for a folder it does not know.
  if (n == 2 && (head == "models" || head == "view_metadata" || head == "global_subgraphs"))
    return http_reply{404, "text/plain; charset=utf-8", ""};
  if (head == "experiment" && n >= 2 && route[1] == "models")
    return n == 2 ? json_answer(json::array()) : http_reply{404, "text/plain; charset=utf-8", ""};
  if (head == "internal" && n == 2) {
    if (route[1] == "logs") return json_answer("");
    if (route[1] == "folder_paths") return json_answer(json::object());
  }
  if (head == "internal" && n == 3 && route[1] == "logs" && route[2] == "raw")
    return json_answer({{"entries", json::array()}, {"size", {{"cols", 80}, {"rows", 24}}}});
  return std::nullopt;
}

}  // namespace orch::orchestrator
