// serve_live_routes: the live views (live_views.hpp) read-only over `serve`'s HTTP, for
// dashboards: GET /orch/status, /orch/diverge, /orch/timeline[?since=] and /metrics (and under
// /api, as ComfyUI serves every route). serve uses the live views; they know nothing of HTTP.
#pragma once

#include <optional>

#include "orch/live/live_views.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::serve {

// The answer on the io thread (other methods: 405); nullopt for every other path.
std::optional<http_reply> live_route(live::live_views& views, const http_request& req);

}  // namespace orch::serve
