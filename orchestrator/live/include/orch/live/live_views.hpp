// live_views: what a running `serve` shows of its processes (docs/cli.md), the same documents
// over the control socket (control_socket.hpp) and, through serve (serve_live_routes.hpp),
// read-only over HTTP for dashboards:
// status (process_status.hpp), diverge (divergence_check.hpp), timeline (memory_sampler.hpp)
// and Prometheus' /metrics (metrics_text.hpp). Everything is read on the io thread from the
// control segment and the host's own tables; no worker is asked.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/live/memory_sampler.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/support/result.hpp"

namespace orch::live {

// "90s", "10m", "2h", "500ms" or a plain number of seconds. Errors: "invalid_request".
result<std::chrono::milliseconds> parse_since(const std::string& text);

class live_views {
 public:
  // `identity` is what a "hello" request answers (the server's pid, deployment and version).
  live_views(runtime::host_runtime& host, memory_sampler& sampler, nlohmann::json identity);

  // All on the io thread.
  nlohmann::json status();
  nlohmann::json diverge();
  std::string metrics();
  // One control-socket request: {"get": "hello"|"status"|"diverge"|"timeline"|"metrics"},
  // with "since" (parse_since's text) for a timeline.
  nlohmann::json answer(const nlohmann::json& request);

 private:
  runtime::host_runtime& host_;
  memory_sampler& sampler_;
  nlohmann::json identity_;
};

}  // namespace orch::live
