#include "orch/serve/serve_live_routes.hpp"

#include <nlohmann/json.hpp>

namespace orch::serve {

namespace {

using nlohmann::json;

http_reply json_http(const json& body, unsigned status = 200) {
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace

void add_live_routes(route_table& table, live::live_views& views) {
  using enum answered_on;
  using request = const http_request&;
  table.add(
      {.method = "GET", .path = "/orch/status", .where = io_thread, .answer = [&views](request) {
         return json_http(views.status());
       }});
  table.add(
      {.method = "GET", .path = "/orch/diverge", .where = io_thread, .answer = [&views](request) {
         return json_http(views.diverge());
       }});
  table.add({.method = "GET",
             .path = "/orch/timeline",
             .where = io_thread,
             .answer = [&views](request r) {
               json ask = {{"get", "timeline"}};
               if (const auto s = r.query.find("since"); s != r.query.end())
                 ask["since"] = s->second;
               const json answer = views.answer(ask);
               return json_http(answer, answer.contains("error") ? 400 : 200);
             }});
  table.add({.method = "GET", .path = "/metrics", .where = io_thread, .answer = [&views](request) {
               return http_reply{200, "text/plain; version=0.0.4; charset=utf-8", views.metrics()};
             }});
}

}  // namespace orch::serve
