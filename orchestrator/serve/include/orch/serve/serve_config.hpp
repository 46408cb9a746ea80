// serve_config: what `comfy-orch serve` is configured with, each default written here or in the
// struct a field is (http_limits, queue_limits), and nowhere else (docs/serve.md, "Limits"). The
// CLI binds its flags to these fields and shows their values as its defaults in --help; a test
// builds a server from one without a command line (serve_server.hpp). The CLI had declared nine
// of http_limits' defaults a second time and copied them over field by field.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "orch/live/memory_sampler.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/serve/serve_queue.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// What a stop (SIGTERM) does to the running prompt; queued prompts are dropped either way.
enum class stop_mode { interrupt, finish };

struct serve_config {
  std::string listen = "127.0.0.1";  // --listen: loopback unless told otherwise
  std::uint16_t port = 8188;         // --port: ComfyUI's; 0 picks a free one
  // The HTTP and WebSocket limits (--max-body, --max-connections, --header-timeout-ms, ...). The
  // server sets body_rule_for (uploads and a pack's routes get max_upload) and spool_directory
  // (the temp directory) itself.
  http_limits http;
  // The largest body of POST /upload/image, /upload/mask or a pack's aiohttp route (--max-upload),
  // spooled to a file; http.max_spooled_in_flight is their budget (--max-uploads-in-flight).
  std::size_t max_upload = std::size_t{64} << 20;
  std::size_t history_size = prompt_queue::default_history_size;  // --history-size
  queue_limits queue;                        // --max-queue, --max-queue-bytes, --max-history-bytes
  stop_mode on_stop = stop_mode::interrupt;  // --on-stop
  // With on_stop interrupt: how long a node that ignores the interrupt may run on before its
  // worker is killed (--stop-grace-ms).
  std::chrono::milliseconds stop_grace{5000};
  // How often the memory timelines are sampled (--sample-ms), and how many samples are kept
  // (--timeline-samples).
  std::chrono::milliseconds sample_period{1000};
  std::size_t timeline_samples = live::memory_sampler::default_capacity;
  // Whether `status`, `top`, `diverge`, `report` and `ls` can find this server (a control socket
  // and its registration; --no-control-socket). The /orch/ routes answer either way.
  bool control_socket = true;
  // The frontend served at / (--front-end-root, a directory holding index.html); unset, the one
  // installed beside comfy-orch, else none (/ answers a page saying how to get one).
  std::optional<std::filesystem::path> front_end_root;
  // --fleet-secret-file: a fleet host, answering only requests that carry this file's secret
  // (fleet_auth.hpp); unset, an ordinary server. Read by serve_server::prepare, which refuses a
  // file that is missing, empty, short or open to group or others. Never a default.
  std::optional<std::filesystem::path> fleet_secret_file;
  // This host's name in a fleet, as GET /orch/fleet/host says it (--fleet-host-name); empty: the
  // machine's host name.
  std::string fleet_host_name;
};

// Whether a server could serve with `config`: one client address may hold half of a body budget
// (byte_budget.hpp), so a body cap past that share could never be received.
// Errors: invalid_config, naming the two flags and the fix.
status check(const serve_config& config);

}  // namespace orch::serve
