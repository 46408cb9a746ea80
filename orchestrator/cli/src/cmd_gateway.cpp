// comfy-orch gateway FLEET.toml [--listen ADDR] [--port N]: one ComfyUI endpoint in front of a
// fleet of `comfy-orch serve` hosts (docs/fleet.md, "The gateway"). The fleet file is read by
// fleet_config.hpp, the server itself is gateway_server.hpp. SIGINT, SIGTERM and SIGHUP stop it.
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/gateway/fleet_config.hpp"
#include "orch/gateway/gateway_server.hpp"
#include "run_signals.hpp"

namespace orch::cli {
namespace {

struct gateway_flags {
  std::string fleet;
  std::optional<std::string> listen;
  std::optional<unsigned> port;
};

int gateway(const gateway_flags& flags) {
  manifests::diagnostics diags;
  auto config = gateway::load_fleet_config(flags.fleet, diags);
  print_diagnostics(std::cerr, diags);
  if (!config) return exit_invalid_input;
  if (flags.listen) config->listen = *flags.listen;
  if (flags.port) config->port = static_cast<std::uint16_t>(*flags.port);
  const std::string listen = config->listen;
  auto server = gateway::gateway_server::prepare(std::move(*config));
  if (!server) {
    std::cerr << "comfy-orch gateway: " << server.err().message << '\n';
    return exit_invalid_input;
  }
  run_signals signals;  // before any thread: every thread inherits the blocked mask
  std::mutex mutex;
  std::condition_variable stop_requested;
  signals.on_interrupt([&] {
    std::lock_guard lock(mutex);
    stop_requested.notify_all();
  });
  int code = exit_ok;
  if (auto port = (*server)->start(); !port) {
    std::cerr << "comfy-orch gateway: " << port.err().message << '\n';
    code = exit_failure;
  } else if (!signals.interrupted()) {
    std::cout << "comfy-orch gateway: listening on http://" << listen << ":" << *port << std::endl;
    std::unique_lock lock(mutex);
    stop_requested.wait(lock, [&] { return signals.interrupted(); });
  }
  std::cerr << "comfy-orch gateway: stopping\n";
  signals.on_interrupt({});
  (*server)->stop();
  server->reset();
  return code;
}

}  // namespace

void add_gateway_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "gateway", "Serve ComfyUI's API for a fleet of serve hosts, with one queue",
      "Answer ComfyUI's API (POST /prompt, /queue, /history, /object_info, /interrupt, /view, "
      "/upload/image, /upload/mask and the WebSocket /ws) once for several `comfy-orch serve` "
      "hosts: those FLEET.toml's [[host]] "
      "list names, or those its [ray] section has the Ray driver start (docs/fleet.md, \"The "
      "gateway\"). The queue stays at the gateway; each prompt goes to "
      "a free host that has all of its node classes (the fleet's placement rule), under the "
      "gateway's prompt id, and its events come back to the client that queued it. A prompt no "
      "host can run gets ComfyUI's 400; a host lost mid-prompt ends that prompt with "
      "execution_error (comfy_orch.HostLost), or queues it again when none of its nodes had "
      "started. The official frontend opens at its address, with the user's settings kept at the "
      "gateway; /free, /system_stats and the jobs API answer for every host. Uploads are kept at "
      "the gateway and sent to each host that runs a prompt naming them, once by content hash; "
      "each prompt's outputs are copied from its host to the gateway's output directory, so /view "
      "and /history answer after the host is gone. GET /orch/fleet shows each host and why each "
      "recent prompt went where it went. "
      "Binds loopback unless --listen says otherwise. Prints 'listening on http://ADDR:PORT' "
      "once it accepts connections. SIGINT/SIGTERM/SIGHUP stop it; exit 0.");
  auto flags = std::make_shared<gateway_flags>();
  cmd->add_option("fleet", flags->fleet, "Fleet file (fleet.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--listen", flags->listen,
                  "Address to bind, over the fleet file's [gateway] listen (127.0.0.1)");
  cmd->add_option("--port", flags->port,
                  "TCP port, over the fleet file's [gateway] port (8188; 0 picks a free one)")
      ->check(CLI::Range(0u, 65535u));
  cmd->callback([flags] {
    const int code = gateway(*flags);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
