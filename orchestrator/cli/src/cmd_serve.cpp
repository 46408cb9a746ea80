// comfy-orch serve <deployment> [--listen ADDR] [--port N]: the deployment's workers kept warm
// behind ComfyUI's own HTTP and WebSocket API (docs/serve.md). The flags are bound to a
// serve_config, whose defaults --help shows; the server itself is serve_server.hpp. SIGINT,
// SIGTERM and SIGHUP stop it gracefully (the running prompt interrupted, or finished with
// --on-stop finish), a second signal at once.
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "command_host.hpp"
#include "commands.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/serve_config.hpp"
#include "orch/serve/serve_server.hpp"
#include "run_signals.hpp"

namespace orch::cli {
namespace {

using serve::serve_config;
using serve::serve_server;
using serve::stop_mode;

int serve(const std::string& deployment, const serve_config& config) {
  int code = exit_ok;
  const auto prepared = prepare_for_command(deployment, code);
  if (!prepared) return code;
  auto server = serve_server::prepare(config, *prepared, ORCH_VERSION);
  if (!server) {
    std::cerr << "comfy-orch serve: " << server.err().message << '\n';
    return server.err().code == serve::serve_errc::invalid_config ? exit_invalid_input
                                                                         : exit_failure;
  }
  if (const auto& root = (*server)->frontend_root())
    std::cerr << "comfy-orch serve: frontend " << root->string() << '\n';
  else
    std::cerr << "comfy-orch serve: no frontend (run scripts/install-deps, or pass "
                 "--front-end-root): / answers a page saying so\n";
  run_signals signals;  // before any thread: every thread inherits the blocked mask
  std::mutex mutex;
  std::condition_variable stop_requested;
  signals.on_interrupt([&] {
    std::lock_guard lock(mutex);
    stop_requested.notify_all();
  });
  const auto host = start_for_command(*prepared);
  if (!host) return exit_failure;
  auto& h = *host;
  runtime::settle_workers(h, [&] { return signals.interrupted(); });
  for (const auto& w : h.on_io_thread([&] { return h.workers().workers(); })) {
    std::cerr << "worker " << w.env << ": " << runtime::to_string(w.state) << " (pid " << w.pid
              << ", " << w.nodes.size() << " node classes)";
    if (w.state != runtime::worker_state::ready) std::cerr << ": " << w.last_error;
    std::cerr << '\n';
  }
  for (const auto& s : h.skipped())
    std::cerr << "env " << s.env << ": no worker: " << s.reason << '\n';

  if (auto port = (*server)->start(h); !port) {
    std::cerr << "comfy-orch serve: " << port.err().message << '\n';
    code = exit_failure;
  } else if (!signals.interrupted()) {
    if (const auto socket = (*server)->control_socket_path())
      std::cerr << "comfy-orch serve: control socket " << *socket << '\n';
    std::cout << "comfy-orch serve: listening on http://" << config.listen << ":" << *port
              << std::endl;
    std::unique_lock lock(mutex);
    stop_requested.wait(lock, [&] { return signals.interrupted(); });
  }
  std::cerr << "comfy-orch serve: stopping ("
            << (config.on_stop == stop_mode::finish ? "finishing" : "interrupting")
            << " the running prompt)\n";
  signals.on_interrupt({});
  (*server)->stop();
  server->reset();
  h.shutdown();
  return code;
}

// A flag in milliseconds bound to a duration of the config, showing its value as the default.
CLI::Option* add_ms_option(CLI::App* cmd, const std::string& name, std::chrono::milliseconds& field,
                           const std::string& help) {
  return cmd
      ->add_option_function<unsigned>(
          name, [&field](unsigned ms) { field = std::chrono::milliseconds(ms); }, help)
      ->default_str(std::to_string(field.count()));
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "serve", "Serve ComfyUI's HTTP and WebSocket API over warm workers",
      "Start the deployment's workers and keep them warm behind ComfyUI's HTTP and WebSocket "
      "API (docs/serve.md), so ComfyUI clients and its own frontend drive it as they drive "
      "ComfyUI, and its processes' memory live to `comfy-orch status`, `top`, `diverge` and "
      "`report` through a control socket (and to dashboards at /orch/status, /orch/diverge, "
      "/orch/timeline and /metrics). Binds loopback unless --listen says otherwise. Prints "
      "'listening on http://ADDR:PORT' once it accepts connections. SIGINT/SIGTERM/SIGHUP stop "
      "it gracefully; exit 0.");
  auto deployment = std::make_shared<std::string>();
  auto c = std::make_shared<serve_config>();
  // Each flag shows its field's value, the config's default, in --help (serve_config.hpp).
  cmd->option_defaults()->always_capture_default();
  cmd->add_option("deployment", *deployment, "Deployment file (comfy-orch.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--listen", c->listen,
                  "Address to bind (0.0.0.0 exposes the API to the network)");
  cmd->add_option("--port", c->port, "TCP port (ComfyUI's; 0 picks a free one)");
  cmd->add_option("--max-body", c->http.max_body,
                  "Largest request body in bytes but an upload's; larger ones get HTTP 413");
  cmd->add_option("--max-upload", c->max_upload,
                  "Largest body of POST /upload/image, /upload/mask or a pack's aiohttp route, in "
                  "bytes; larger ones get HTTP 413");
  cmd->add_option("--max-bodies-in-flight", c->http.max_bodies_in_flight,
                  "Bytes of request bodies held in memory at once, counted as they arrive past "
                  "each body's first 64 KiB; one client address holds half at most. Past it the "
                  "slowest body still arriving, if at most half as fast as the one that needs "
                  "room, is closed; else that one gets 503")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 40));
  cmd->add_option("--max-uploads-in-flight", c->http.max_spooled_in_flight,
                  "Bytes of uploads being received at once, which go to unlinked files of the "
                  "temp directory, not to memory; counted as --max-bodies-in-flight counts")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 50));
  cmd->add_option("--max-answers-in-flight", c->http.max_answers_in_flight,
                  "Bytes of answers held in memory while clients read them (past each answer's "
                  "first 64 KiB, a streamed one's piece being written); one client address holds "
                  "half at most. Past it the slowest reader, if at most half as fast as the "
                  "answer that needs room, is closed; else that answer is 503")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 50));
  cmd->add_option("--max-ws-queue-bytes", c->http.max_ws_queue_bytes,
                  "Bytes of messages waiting for one WebSocket client that does not read; past "
                  "it the client is disconnected, with a warning")
      ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 32));
  cmd->add_option("--max-ws-clients", c->http.max_ws_clients,
                  "WebSocket clients at once; more get HTTP 503");
  cmd->add_option("--max-ws-clients-per-peer", c->http.max_ws_clients_per_peer,
                  "WebSocket clients one client address may hold at once; past it, its own "
                  "oldest client is cut to make room")
      ->check(CLI::Range(1u, 1u << 16));
  cmd->add_option("--enable-cors-header", c->http.cors_origin,
                  "Allow cross-origin requests, as ComfyUI's flag does: every answer carries "
                  "Access-Control-Allow-Origin ORIGIN ('*' when none is given). Without it a "
                  "server on loopback answers 403 to a request whose Origin is another site's")
      ->expected(0, 1)
      ->default_str("*");
  cmd->add_option("--max-connections", c->http.max_connections,
                  "HTTP connections at once; when all are taken, the one that has waited longest "
                  "for its request closes to make room, or a new one gets 503");
  cmd->add_option("--max-connections-per-peer", c->http.max_connections_per_peer,
                  "HTTP connections one client address may hold at once; past it, its own "
                  "longest-waiting connection closes to make room")
      ->check(CLI::Range(1u, 1u << 20));
  add_ms_option(cmd, "--header-timeout-ms", c->http.header_timeout,
                "A request's header must arrive within this many ms, and its body may not stall "
                "for as long; a slower client is disconnected")
      ->check(CLI::Range(10u, 3600000u));
  cmd->add_option("--min-answer-rate", c->http.min_answer_rate,
                  "Bytes a second a client must read an answer at on average once it has had "
                  "--header-timeout-ms (0: no floor); a slower one is disconnected")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  cmd->add_option("--min-body-rate", c->http.min_body_rate,
                  "Bytes a second a request body must average once it has had "
                  "--header-timeout-ms (0: no floor); a slower one is disconnected")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  cmd->add_option("--max-queue", c->queue.max_pending,
                  "Prompts waiting at once; past it POST /prompt answers 503 queue_full")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cmd->add_option("--max-queue-bytes", c->queue.max_pending_bytes,
                  "Bytes of prompt bodies waiting at once (a parsed prompt takes about four times "
                  "its body); past it POST /prompt answers 503 queue_full")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 40));
  cmd->add_option("--history-size", c->history_size,
                  "Finished prompts kept in /history (ComfyUI's number)");
  cmd->add_option("--max-history-bytes", c->queue.max_history_bytes,
                  "Bytes of finished prompts kept in /history, each counted as twice its JSON text "
                  "(it is kept parsed and as text); past it the oldest go first")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 40));
  add_ms_option(cmd, "--stop-grace-ms", c->stop_grace,
                "With --on-stop interrupt: how long (ms) a node that ignores the interrupt may run "
                "on before its worker is killed and serve exits")
      ->check(CLI::Range(0u, 600000u));
  cmd->add_option_function<std::string>(
         "--on-stop",
         [c](const std::string& mode) {
           c->on_stop = mode == "finish" ? stop_mode::finish : stop_mode::interrupt;
         },
         "On SIGTERM: 'interrupt' the running prompt or let it 'finish'; queued prompts are "
         "dropped either way")
      ->check(CLI::IsMember({"interrupt", "finish"}))
      ->default_str(c->on_stop == stop_mode::finish ? "finish" : "interrupt");
  add_ms_option(cmd, "--sample-ms", c->sample_period,
                "How often (ms) the memory timelines are sampled from the control segment "
                "(`comfy-orch report`, /orch/timeline)")
      ->check(CLI::Range(10u, 60000u));
  cmd->add_option("--timeline-samples", c->timeline_samples,
                  "Samples the timeline ring buffer keeps (at the default --sample-ms, an hour)")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 20));
  cmd->add_option("--front-end-root", c->front_end_root,
                  "Serve the frontend in DIR at / (a directory holding index.html, as ComfyUI's "
                  "--front-end-root); unset: the comfyui-frontend-package installed with "
                  "comfy-orch (scripts/install-deps unpacks it)");
  cmd->add_option("--fleet-secret-file", c->fleet_secret_file,
                  "Serve as a fleet host, for its gateway alone: every request and WebSocket "
                  "upgrade must carry 'Authorization: Bearer SECRET', SECRET being this file's "
                  "content (one trailing newline stripped; at least 32 bytes, mode 600), else "
                  "HTTP 401. There is no default secret (docs/security.md, \"Fleet hosts\")");
  cmd->add_option("--fleet-host-name", c->fleet_host_name,
                  "This host's name in a fleet, as GET /orch/fleet/host says it; unset: the "
                  "machine's host name")
      ->type_name("NAME");
  cmd->add_flag("!--no-control-socket", c->control_socket,
                "Open no control socket: `status`, `top`, `diverge` and `report` cannot find "
                "this server (the /orch/ HTTP routes still answer)");
  cmd->callback([deployment, c] {
    const int code = serve(*deployment, *c);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
