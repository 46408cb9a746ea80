// serve_live_routes: the live views (live_views.hpp) read-only over `serve`'s HTTP, for
// dashboards: GET /orch/status, /orch/diverge, /orch/timeline[?since=] and /metrics (and under
// /api, as ComfyUI serves every route), answered on the io thread, which reads them from the
// control segment without asking any worker. serve uses the live views; they know nothing of HTTP.
#pragma once

#include "orch/live/live_views.hpp"
#include "orch/serve/route_table.hpp"

namespace orch::serve {

// Adds the routes to `table`; `views` must outlive its use.
void add_live_routes(route_table& table, live::live_views& views);

}  // namespace orch::serve
