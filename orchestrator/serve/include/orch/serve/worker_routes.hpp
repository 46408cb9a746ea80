// The aiohttp routes packs register in their workers, as serve answers them (docs/serve.md, "A
// pack's aiohttp routes"): after serve's own routes (ComfyUI's core routes are registered
// first, and the first registration answers), a request is forwarded to the worker whose
// route has the request's first path segment (under /api too, as ComfyUI serves every route):
// the worker's aiohttp matches the rest, its variables and methods. Every served route starts
// with a literal segment of its own (the worker's path rule), so a route cannot answer the page,
// /api, /ws or another pack's /extensions/. Two envs with routes under one first segment: the
// first env (by name) answers it, and the start's log names both.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "orch/runtime/host_runtime.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::orchestrator {

// The forwarded request for `req`, when a worker's route answers it.
std::shared_ptr<forwarded_request> worker_route_for(host_runtime& host, const http_request& req);

// The log lines of routes whose first segment another env's route has already: said at start.
std::vector<std::string> worker_route_clashes(host_runtime& host);

// The first segments the workers' routes answer under (their routes are fixed once the workers
// are ready: a restarted worker registers the same), and a path's first segment ("/api/p/x"
// and "/p/x" give "p"). A body sent to one of them is the pack's: spooled, as uploads are.
std::set<std::string> worker_route_segments(host_runtime& host);
std::string route_first_segment(std::string path);

}  // namespace orch::orchestrator
