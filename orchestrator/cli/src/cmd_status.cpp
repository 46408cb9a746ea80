// comfy-orch status [<deployment>] [--socket S | --url URL] [--json]: one row per process of a
// running serve, read live through its control socket, or over HTTP from a serve or a gateway
// (every host's, a section a host) (docs/cli.md, "status").
#include <memory>

#include "command_server.hpp"
#include "commands.hpp"
#include "orch/live/fleet_text.hpp"
#include "orch/live/live_text.hpp"

namespace orch::cli {

void add_status_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "status", "Show each process of a running serve, live",
      "One row per process of a running `comfy-orch serve`, the host and each worker: its mode "
      "(or why in-process), memory manager and why, plugins and protocol level with the settings "
      "the adapter dropped, device and free-memory view, resident and pinned bytes against the "
      "one budget, cast buffers against their bound, epoch, calls, generation, restarts and "
      "state. Read live through the server's control socket, or with --url over HTTP from a serve "
      "or a gateway (a section for each host of the fleet, and the hosts that did not answer); "
      "exit 2 when it cannot be reached.");
  auto choice = std::make_shared<server_choice>();
  auto json_out = std::make_shared<bool>(false);
  add_server_options(cmd, *choice);
  add_url_options(cmd, *choice);
  cmd->add_flag("--json", *json_out, "The status document (docs/cli.md) instead of the table");
  cmd->callback([choice, json_out] {
    if (!show_document("status", *choice, "status", *json_out, live::format_status,
                       live::format_fleet_status))
      throw CLI::RuntimeError(exit_failure);
  });
}

}  // namespace orch::cli
