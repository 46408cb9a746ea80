#include "orch/serve/serve_live_routes.hpp"

#include <nlohmann/json.hpp>

namespace orch::serve {

namespace {

using nlohmann::json;

http_reply json_http(const json& body, unsigned status = 200) {
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace

std::optional<http_reply> live_route(live::live_views& views, const http_request& req) {
  const std::string p = req.path.rfind("/api/", 0) == 0 ? req.path.substr(4) : req.path;
  if (p != "/orch/status" && p != "/orch/diverge" && p != "/orch/timeline" && p != "/metrics")
    return std::nullopt;
  if (req.method != "GET")
    return json_http({{"error", req.method + " is not allowed on " + p}}, 405);
  if (p == "/orch/status") return json_http(views.status());
  if (p == "/orch/diverge") return json_http(views.diverge());
  if (p == "/metrics")
    return http_reply{200, "text/plain; version=0.0.4; charset=utf-8", views.metrics()};
  json request = {{"get", "timeline"}};
  if (const auto s = req.query.find("since"); s != req.query.end()) request["since"] = s->second;
  json answer = views.answer(request);
  return json_http(answer, answer.contains("error") ? 400 : 200);
}

}  // namespace orch::serve
