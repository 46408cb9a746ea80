// comfy-orch serve <deployment> [--listen ADDR] [--port N]: the deployment's workers kept warm
// behind ComfyUI's own HTTP and WebSocket API (docs/serve.md). Prompts queue and run one at a
// time; SIGINT, SIGTERM and SIGHUP stop it gracefully (the running prompt interrupted, or
// finished with --on-stop finish), a second signal at once.
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "command_host.hpp"
#include "commands.hpp"
#include "orch/control/control_directory.hpp"
#include "orch/control/control_socket.hpp"
#include "orch/live/live_views.hpp"
#include "orch/live/memory_sampler.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/serve/byte_budget.hpp"
#include "orch/serve/extension_web_dirs.hpp"
#include "orch/serve/serve_api.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/serve/serve_live_routes.hpp"
#include "orch/serve/worker_routes.hpp"
#include "run_signals.hpp"

namespace orch::cli {
namespace {

struct serve_options {
  std::string deployment;
  std::string listen = "127.0.0.1";
  std::uint16_t port = 8188;
  std::size_t max_body = std::size_t{8} << 20;
  std::size_t max_upload = std::size_t{64} << 20;  // POST /upload/image's body
  unsigned max_ws_clients = 64;
  unsigned max_ws_clients_per_peer = 16;
  std::size_t max_ws_queue_bytes = std::size_t{8} << 20;
  std::size_t max_bodies_in_flight = std::size_t{192} << 20;
  std::size_t max_uploads_in_flight = std::size_t{1} << 30;
  std::size_t max_answers_in_flight = std::size_t{256} << 20;
  std::size_t min_answer_rate = 1024;
  unsigned max_connections = 256;
  unsigned max_connections_per_peer = 64;
  std::size_t min_body_rate = 1024;
  std::optional<std::string> cors_origin;  // --enable-cors-header
  std::size_t history_size = serve::prompt_queue::default_history_size;
  serve::queue_limits queue;
  std::string on_stop = "interrupt";
  unsigned stop_grace_ms = 5000;
  unsigned header_timeout_ms = 10000;
  unsigned sample_ms = 1000;
  std::size_t timeline_samples = live::memory_sampler::default_capacity;
  bool control_socket = true;
  std::optional<std::string> front_end_root;  // --front-end-root
};

// The frontend serve answers / with: --front-end-root's (which must hold index.html), else the
// one installed beside comfy-orch (install_layout.hpp) when it is there, else none (nullopt in
// `root`: / answers a page saying how to get one). False when --front-end-root is unusable.
bool frontend_root(const serve_options& o, std::optional<std::filesystem::path>& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (o.front_end_root) {
    const fs::path dir = fs::absolute(*o.front_end_root);
    if (!fs::is_regular_file(dir / "index.html", ec)) {
      std::cerr << "comfy-orch serve: --front-end-root " << dir.string()
                << " holds no index.html\n  fix: name the directory of a built frontend (the "
                   "comfyui-frontend-package wheel's comfyui_frontend_package/static)\n";
      return false;
    }
    root = dir;
  } else if (const fs::path dir = process::this_install_layout().frontend_directory;
             fs::is_regular_file(dir / "index.html", ec)) {
    root = dir;
  }
  if (root)
    std::cerr << "comfy-orch serve: frontend " << root->string() << '\n';
  else
    std::cerr << "comfy-orch serve: no frontend (run scripts/install-deps, or pass "
                 "--front-end-root): / answers a page saying so\n";
  return true;
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The control socket and its registration (docs/cli.md, "The control socket"), or why not.
struct control_endpoint {
  std::filesystem::path dir;
  control::server_registration registration;
};

std::optional<control_endpoint> open_control_endpoint(const serve_options& o) {
  auto dir = control::open_control_directory();
  if (!dir) {
    std::cerr << "comfy-orch serve: " << dir.err().message
              << "\n  (or start with --no-control-socket to serve without one)\n";
    return std::nullopt;
  }
  control_endpoint e{*dir, {}};
  e.registration.pid = ::getpid();
  std::error_code ec;
  e.registration.deployment = std::filesystem::canonical(o.deployment, ec).string();
  e.registration.socket = (*dir / (std::to_string(::getpid()) + ".sock")).string();
  e.registration.version = ORCH_VERSION;
  e.registration.started_unix_ms = unix_ms_now();
  return e;
}

int serve(const serve_options& o) {
  // One client address may hold half of a budget (byte_budget.hpp): the largest body must fit.
  const struct {
    std::size_t largest, budget;
    const char *largest_flag, *budget_flag;
  } pairs[] = {{o.max_upload, o.max_uploads_in_flight, "--max-upload", "--max-uploads-in-flight"},
               {o.max_body, o.max_bodies_in_flight, "--max-body", "--max-bodies-in-flight"}};
  for (const auto& p : pairs) {
    if (serve::byte_budget::due(p.largest) <= p.budget / 2) continue;
    std::cerr << "comfy-orch serve: " << p.largest_flag << " (" << p.largest
              << " bytes) is larger than one client's share of " << p.budget_flag << " ("
              << p.budget << " / 2, past each body's first 64 KiB): no body that large could "
              << "ever be received\n  fix: raise " << p.budget_flag << " to at least twice "
              << p.largest_flag << '\n';
    return exit_invalid_input;
  }
  std::optional<std::filesystem::path> front_end;
  if (!frontend_root(o, front_end)) return exit_invalid_input;
  int code = exit_ok;
  const auto prepared = prepare_for_command(o.deployment, code);
  if (!prepared) return code;
  // ComfyUI makes its input, output and temp directories at start; so does serve, before any
  // worker starts, so that a directory it cannot make stops it at once.
  const auto directories = serve::file_directories_of(prepared->deployment);
  if (auto made = serve::create_file_directories(directories); !made) {
    std::cerr << "comfy-orch serve: " << made.err().message
              << "\n  fix: create it, or point [server] input_directory / output_directory at "
                 "directories serve may create and write (temp/ is in the ComfyUI root, or "
                 "beside the deployment file)\n";
    return exit_failure;
  }
  std::optional<control_endpoint> endpoint;
  if (o.control_socket) {
    endpoint = open_control_endpoint(o);
    if (!endpoint) return exit_failure;
  }
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
  for (const auto& s : h.skipped()) std::cerr << "env " << s.env << ": no worker: " << s.reason << '\n';

  serve::http_limits limits;
  limits.max_body = o.max_body;
  // A body for a pack's route is the pack's: spooled, as uploads are (the routes are the workers'
  // once they are ready; a restarted worker registers the same).
  const auto worker_routes = serve::worker_routes_of(h);
  for (const auto& line : serve::worker_route_clashes(worker_routes))
    spdlog::warn("serve: {}", line);
  limits.body_rule_for = [&o, worker_routes](const std::string& method, const std::string& path) {
    return serve::comfy_api::takes_upload(method, path) || serve::env_answering(worker_routes, path)
               ? serve::body_rule{o.max_upload, true}
               : serve::body_rule{o.max_body, false};
  };
  limits.spool_directory = directories.temp;
  limits.max_spooled_in_flight = o.max_uploads_in_flight;
  limits.max_connections_per_peer = o.max_connections_per_peer;
  limits.min_body_rate = o.min_body_rate;
  limits.max_ws_clients = o.max_ws_clients;
  limits.max_ws_clients_per_peer = o.max_ws_clients_per_peer;
  limits.max_ws_queue_bytes = o.max_ws_queue_bytes;
  limits.max_bodies_in_flight = o.max_bodies_in_flight;
  limits.max_answers_in_flight = o.max_answers_in_flight;
  limits.min_answer_rate = o.min_answer_rate;
  limits.max_connections = o.max_connections;
  limits.cors_origin = o.cors_origin;
  limits.header_timeout = std::chrono::milliseconds(o.header_timeout_ms);
  live::memory_sampler sampler(h, std::chrono::milliseconds(o.sample_ms), o.timeline_samples);
  h.set_memory_event_sink([&](const std::string& kind, const std::string& env,
                              const std::string& text) { sampler.note(kind, env, text); });
  nlohmann::json identity = {{"pid", static_cast<long>(::getpid())}, {"version", ORCH_VERSION}};
  if (endpoint) identity["deployment"] = endpoint->registration.deployment;
  live::live_views views(h, sampler, identity);
  serve::comfy_api* api_ptr = nullptr;
  serve::http_server server(
      h.io(), limits, [&](const serve::http_request& r) { return api_ptr->handle(r); },
      [&](const serve::http_request& r) -> std::optional<serve::http_reply> {
        if (auto reply = serve::live_route(views, r)) return reply;  // read-only
        return api_ptr->at_once(r);
      },
      [&](const std::string& sid) { return api_ptr->greeting(sid); });
  control::control_socket control(
      h.io(), [&](const nlohmann::json& request) { return views.answer(request); });
  sampler.start();
  auto api = std::make_unique<serve::comfy_api>(
      h, server, o.history_size, serve::server_identity{ORCH_VERSION, prepared->stack}, o.queue,
      serve::frontend_routes(
          serve::frontend_files(front_end, serve::extension_web_dirs(prepared->inventory)),
          serve::user_data(directories.user), o.max_upload));
  api_ptr = api.get();
  status controlled = ok_status();
  if (endpoint) controlled = control.listen(endpoint->registration.socket);
  if (!controlled) {
    std::cerr << "comfy-orch serve: " << controlled.err().message << '\n';
    code = exit_failure;
  } else if (auto port = server.listen(o.listen, o.port); !port) {
    std::cerr << "comfy-orch serve: " << port.err().message
              << "\n  fix: choose another --port (0 picks a free one) or --listen address\n";
    code = exit_failure;
  } else if (!signals.interrupted()) {
    if (endpoint) {
      endpoint->registration.http = "http://" + o.listen + ":" + std::to_string(*port);
      if (auto written = control::write_registration(endpoint->dir, endpoint->registration);
          !written) {
        std::cerr << "comfy-orch serve: " << written.err().message
                  << " (`comfy-orch ls` will not list this server)\n";
      }
      std::cerr << "comfy-orch serve: control socket " << endpoint->registration.socket << '\n';
    }
    std::cout << "comfy-orch serve: listening on http://" << o.listen << ":" << *port
              << std::endl;
    std::unique_lock lock(mutex);
    stop_requested.wait(lock, [&] { return signals.interrupted(); });
  }
  std::cerr << "comfy-orch serve: stopping ("
            << (o.on_stop == "finish" ? "finishing" : "interrupting") << " the running prompt)\n";
  signals.on_interrupt({});
  if (endpoint) control::remove_registration(endpoint->dir, ::getpid());
  control.stop();
  sampler.stop();
  api->stop(o.on_stop != "finish", std::chrono::milliseconds(o.stop_grace_ms));
  server.stop();
  api.reset();
  h.shutdown();
  return code;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve",
      "Start the deployment's workers and keep them warm behind ComfyUI's HTTP and WebSocket "
      "API (POST /prompt, /queue, /history, /object_info, /interrupt, /free, /system_stats, "
      "/view, /upload/image, /ws), so ComfyUI clients drive it as they drive ComfyUI, and its "
      "processes' memory live to `comfy-orch status`, `top`, `diverge` and `report` through a "
      "control socket (and to dashboards at /orch/status, /orch/diverge, /orch/timeline and "
      "/metrics). Binds loopback unless --listen says otherwise. Prints 'listening on "
      "http://ADDR:PORT' once it accepts connections. SIGINT/SIGTERM/SIGHUP stop it gracefully; exit 0.");
  auto o = std::make_shared<serve_options>();
  cmd->add_option("deployment", o->deployment, "Deployment file (comfy-orch.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--listen", o->listen,
                  "Address to bind (default 127.0.0.1; 0.0.0.0 exposes the API to the network)");
  cmd->add_option("--port", o->port, "TCP port (default 8188, ComfyUI's; 0 picks a free one)");
  cmd->add_option("--max-body", o->max_body,
                  "Largest request body in bytes (default 8 MiB) but an upload's; larger ones get "
                  "HTTP 413");
  cmd->add_option("--max-upload", o->max_upload,
                  "Largest body of POST /upload/image, /upload/mask or a pack's aiohttp route, in "
                  "bytes (default 64 MiB); larger ones get HTTP 413");
  cmd->add_option("--max-bodies-in-flight", o->max_bodies_in_flight,
                  "Bytes of request bodies held in memory at once (default 192 MiB), counted as "
                  "they arrive past each body's first 64 KiB; one client address holds half at "
                  "most. Past it the slowest body still arriving, if at most half as fast as the "
                  "one that needs room, is closed; else that one gets 503")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 40));
  cmd->add_option("--max-uploads-in-flight", o->max_uploads_in_flight,
                  "Bytes of uploads being received at once (default 1 GiB), which go to unlinked "
                  "files of the temp directory, not to memory; counted as --max-bodies-in-flight "
                  "counts")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 50));
  cmd->add_option("--max-answers-in-flight", o->max_answers_in_flight,
                  "Bytes of answers held in memory while clients read them (default 256 MiB; "
                  "past each answer's first 64 KiB, a streamed one's piece being written); one "
                  "client address holds half at most. Past it the slowest reader, if at most half "
                  "as fast as the answer that needs room, is closed; else that answer is 503")
      ->check(CLI::Range(std::size_t{1} << 16, std::size_t{1} << 50));
  cmd->add_option("--max-ws-queue-bytes", o->max_ws_queue_bytes,
                  "Bytes of messages waiting for one WebSocket client that does not read "
                  "(default 8 MiB); past it the client is disconnected, with a warning")
      ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 32));
  cmd->add_option("--max-ws-clients", o->max_ws_clients,
                  "WebSocket clients at once (default 64); more get HTTP 503");
  cmd->add_option("--max-ws-clients-per-peer", o->max_ws_clients_per_peer,
                  "WebSocket clients one client address may hold at once (default 16); past it, "
                  "its own oldest client is cut to make room")
      ->check(CLI::Range(1u, 1u << 16));
  cmd->add_option("--enable-cors-header", o->cors_origin,
                  "Allow cross-origin requests, as ComfyUI's flag does: every answer carries "
                  "Access-Control-Allow-Origin ORIGIN ('*' when none is given). Without it a "
                  "server on loopback answers 403 to a request whose Origin is another site's")
      ->expected(0, 1)
      ->default_str("*");
  cmd->add_option("--max-connections", o->max_connections,
                  "HTTP connections at once (default 256); when all are taken, the one that has "
                  "waited longest for its request closes to make room, or a new one gets 503");
  cmd->add_option("--max-connections-per-peer", o->max_connections_per_peer,
                  "HTTP connections one client address may hold at once (default 64); past it, "
                  "its own longest-waiting connection closes to make room")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--header-timeout-ms", o->header_timeout_ms,
                  "A request's header must arrive within this (default 10000 ms), and its body "
                  "may not stall for as long; a slower client is disconnected")
      ->check(CLI::Range(10u, 3600000u));
  cmd->add_option("--min-answer-rate", o->min_answer_rate,
                  "Bytes a second a client must read an answer at on average once it has had "
                  "--header-timeout-ms (default 1024; 0: no floor); a slower one is disconnected")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  cmd->add_option("--min-body-rate", o->min_body_rate,
                  "Bytes a second a request body must average once it has had "
                  "--header-timeout-ms (default 1024; 0: no floor); a slower one is disconnected")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  cmd->add_option("--max-queue", o->queue.max_pending,
                  "Prompts waiting at once (default 1000); past it POST /prompt answers 503 "
                  "queue_full")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cmd->add_option("--max-queue-bytes", o->queue.max_pending_bytes,
                  "Bytes of prompt bodies waiting at once (default 32 MiB; a parsed prompt takes "
                  "about four times its body); past it POST /prompt answers 503 queue_full")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 40));
  cmd->add_option("--history-size", o->history_size,
                  "Finished prompts kept in /history (default 10000, ComfyUI's)");
  cmd->add_option("--max-history-bytes", o->queue.max_history_bytes,
                  "Bytes of finished prompts kept in /history, each counted as twice its JSON text "
                  "(it is kept parsed and as text; default 128 MiB); past it the oldest go first")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 40));
  cmd->add_option("--stop-grace-ms", o->stop_grace_ms,
                  "With --on-stop interrupt: how long a node that ignores the interrupt may run on "
                  "before its worker is killed and serve exits (default 5000 ms)")
      ->check(CLI::Range(0u, 600000u));
  cmd->add_option("--on-stop", o->on_stop,
                  "On SIGTERM: 'interrupt' the running prompt (default) or let it 'finish'; "
                  "queued prompts are dropped either way")
      ->check(CLI::IsMember({"interrupt", "finish"}));
  cmd->add_option("--sample-ms", o->sample_ms,
                  "How often the memory timelines are sampled from the control segment "
                  "(default 1000 ms; `comfy-orch report`, /orch/timeline)")
      ->check(CLI::Range(10u, 60000u));
  cmd->add_option("--timeline-samples", o->timeline_samples,
                  "Samples the timeline ring buffer keeps (default 3600: an hour at 1 s)")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 20));
  cmd->add_option("--front-end-root", o->front_end_root,
                  "Serve the frontend in DIR at / (a directory holding index.html, as ComfyUI's "
                  "--front-end-root); default: the comfyui-frontend-package installed with "
                  "comfy-orch (scripts/install-deps unpacks it)");
  cmd->add_flag("!--no-control-socket", o->control_socket,
                "Open no control socket: `status`, `top`, `diverge` and `report` cannot find "
                "this server (the /orch/ HTTP routes still answer)");
  cmd->callback([o] {
    const int code = serve(*o);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
