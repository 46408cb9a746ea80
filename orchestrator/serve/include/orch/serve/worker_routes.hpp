// The aiohttp routes packs register in their workers, as serve answers them (docs/serve.md, "A
// pack's aiohttp routes"): after serve's own routes (ComfyUI registers its core routes first,
// and the first registration answers) and before its web root, a request goes to the worker
// with a route whose literal part answers its path (under /api too, as ComfyUI serves every
// route): the whole path of a route without variables, the path up to its first variable
// otherwise. The worker's aiohttp matches the rest (variables, methods). Every served route
// starts with a literal segment of its own (the worker's path rule), so a route cannot answer
// the page, /api, /ws or another pack's /extensions/. Where routes of two envs have the same
// literal part, the first env by name answers, and the start's log names the other's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "orch/runtime/host_runtime.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::serve {

// One route as serve matches it.
struct worker_route {
  std::string env;
  std::string path;     // as the pack registered it
  std::string literal;  // its path up to its first variable
  bool exact = false;   // it has no variable: only its whole path answers
};

// The workers' aiohttp routes now, by env name (io thread: through host.on_io_thread).
std::vector<worker_route> worker_routes_of(runtime::host_runtime& host);

// The env whose route answers `path` (percent-decoded, "/api/" or not), if one does.
std::optional<std::string> env_answering(const std::vector<worker_route>& routes,
                                         const std::string& path);

// The forwarded request for `req`, when a worker's route answers it.
std::shared_ptr<forwarded_request> worker_route_for(runtime::host_runtime& host,
                                                    const http_request& req);

// The log lines of routes whose literal part an earlier env's route has: said at start.
std::vector<std::string> worker_route_clashes(const std::vector<worker_route>& routes);

}  // namespace orch::serve
