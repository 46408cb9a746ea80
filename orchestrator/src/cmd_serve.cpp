// comfy-orch serve <deployment> [--listen ADDR] [--port N]: the deployment's workers kept warm
// behind ComfyUI's own HTTP and WebSocket API (docs/serve.md). Prompts queue and run one at a
// time; SIGINT, SIGTERM and SIGHUP stop it gracefully (the running prompt interrupted, or
// finished with --on-stop finish), a second signal at once.
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>

#include "command_host.hpp"
#include "commands.hpp"
#include "host_startup.hpp"
#include "orch/orchestrator/host_runtime.hpp"
#include "run_signals.hpp"
#include "serve_api.hpp"
#include "serve_files.hpp"
#include "serve_http.hpp"

namespace orch::cli {
namespace {

struct serve_options {
  std::string deployment;
  std::string listen = "127.0.0.1";
  std::uint16_t port = 8188;
  std::size_t max_body = std::size_t{8} << 20;
  std::size_t max_upload = std::size_t{64} << 20;  // POST /upload/image's body
  unsigned max_ws_clients = 64;
  unsigned max_connections = 256;
  std::size_t history_size = orchestrator::prompt_queue::default_history_size;
  std::string on_stop = "interrupt";
  unsigned header_timeout_ms = 10000;
};

int serve(const serve_options& o) {
  int code = exit_ok;
  const auto prepared = prepare_for_command(o.deployment, code);
  if (!prepared) return code;
  // ComfyUI makes its input, output and temp directories at start; so does serve, before any
  // worker starts, so that a directory it cannot make stops it at once.
  const auto directories = orchestrator::file_directories_of(prepared->deployment);
  if (auto made = orchestrator::create_file_directories(directories); !made) {
    std::cerr << "comfy-orch serve: " << made.err().message
              << "\n  fix: create it, or point [server] input_directory / output_directory at "
                 "directories serve may create and write (temp/ is in the ComfyUI root, or "
                 "beside the deployment file)\n";
    return exit_failure;
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
  orchestrator::settle_workers(h, [&] { return signals.interrupted(); });
  for (const auto& w : h.on_io_thread([&] { return h.workers().workers(); })) {
    std::cerr << "worker " << w.env << ": " << orchestrator::to_string(w.state) << " (pid "
              << w.pid << ", " << w.nodes.size() << " node classes)";
    if (w.state != orchestrator::worker_state::ready) std::cerr << ": " << w.last_error;
    std::cerr << '\n';
  }
  for (const auto& s : h.skipped()) std::cerr << "env " << s.env << ": no worker: " << s.reason << '\n';

  orchestrator::http_limits limits;
  limits.max_body = o.max_body;
  limits.body_limit_for = [&o](const std::string& method, const std::string& path) {
    return orchestrator::comfy_api::takes_upload(method, path) ? o.max_upload : o.max_body;
  };
  limits.max_ws_clients = o.max_ws_clients;
  limits.max_connections = o.max_connections;
  limits.header_timeout = std::chrono::milliseconds(o.header_timeout_ms);
  orchestrator::comfy_api* api_ptr = nullptr;
  orchestrator::http_server server(
      h.io(), limits, [&](const orchestrator::http_request& r) { return api_ptr->handle(r); },
      [&](const orchestrator::http_request& r) { return api_ptr->at_once(r); },
      [&](const std::string& sid) { return api_ptr->greeting(sid); });
  auto api = std::make_unique<orchestrator::comfy_api>(h, server, o.history_size, ORCH_VERSION);
  api_ptr = api.get();
  if (auto port = server.listen(o.listen, o.port); !port) {
    std::cerr << "comfy-orch serve: " << port.err().message
              << "\n  fix: choose another --port (0 picks a free one) or --listen address\n";
    code = exit_failure;
  } else if (!signals.interrupted()) {
    std::cout << "comfy-orch serve: listening on http://" << o.listen << ":" << *port
              << std::endl;
    std::unique_lock lock(mutex);
    stop_requested.wait(lock, [&] { return signals.interrupted(); });
  }
  std::cerr << "comfy-orch serve: stopping ("
            << (o.on_stop == "finish" ? "finishing" : "interrupting") << " the running prompt)\n";
  signals.on_interrupt({});
  api->stop(o.on_stop != "finish");
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
      "/view, /upload/image, /ws), so ComfyUI clients drive it as they drive ComfyUI. Binds "
      "loopback unless --listen says otherwise. Prints 'listening on http://ADDR:PORT' once it "
      "accepts connections. SIGINT/SIGTERM/SIGHUP stop it gracefully; exit 0.");
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
                  "Largest POST /upload/image body in bytes (default 64 MiB); larger ones get "
                  "HTTP 413");
  cmd->add_option("--max-ws-clients", o->max_ws_clients,
                  "WebSocket clients at once (default 64); more get HTTP 503");
  cmd->add_option("--max-connections", o->max_connections,
                  "HTTP connections at once (default 256); more get HTTP 503");
  cmd->add_option("--header-timeout-ms", o->header_timeout_ms,
                  "A request's header must arrive within this (default 10000 ms), and its body "
                  "may not stall for as long; a slower client is disconnected")
      ->check(CLI::Range(10u, 3600000u));
  cmd->add_option("--history-size", o->history_size,
                  "Finished prompts kept in /history (default 10000, ComfyUI's)");
  cmd->add_option("--on-stop", o->on_stop,
                  "On SIGTERM: 'interrupt' the running prompt (default) or let it 'finish'; "
                  "queued prompts are dropped either way")
      ->check(CLI::IsMember({"interrupt", "finish"}));
  cmd->callback([o] {
    const int code = serve(*o);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
