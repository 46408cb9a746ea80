// comfy-orch diverge [<deployment>] [--socket S | --url URL] [--json]: the host against each
// worker of a running serve (with --url at a gateway: of every host), every difference with its
// explanation and fix (docs/cli.md, "diverge"). Exit 0: no divergence; 1: a divergence not
// acknowledged (on any host); 2: the server could not be asked.
#include <memory>

#include "command_server.hpp"
#include "commands.hpp"
#include "orch/live/fleet_text.hpp"
#include "orch/live/live_text.hpp"

namespace orch::cli {

void add_diverge_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "diverge", "Compare each worker of a running serve with its host",
      "Compares each worker of a running `comfy-orch serve` with its host: memory manager and "
      "reasons, plugin names, versions and levels, settings the adapter dropped, the mirrored "
      "settings field by field, free-memory view, pinned budget and cgroup view, cast buffers "
      "against their bound, and the worker's models against the host's stand-ins. Each "
      "difference comes with why it matters and its fix. Exit 0: no divergence; 1: a divergence "
      "not acknowledged with ORCH_DIVERGENCE_ACK; 2: the server could not be asked. With --url "
      "at a gateway, every host's, a section a host.");
  auto choice = std::make_shared<server_choice>();
  auto json_out = std::make_shared<bool>(false);
  add_server_options(cmd, *choice);
  add_url_options(cmd, *choice);
  cmd->add_flag("--json", *json_out, "The diverge document (docs/cli.md) instead of the text");
  cmd->callback([choice, json_out] {
    const auto found = show_document("diverge", *choice, "diverge", *json_out,
                                     live::format_divergences, live::format_fleet_divergences);
    if (!found) throw CLI::RuntimeError(exit_failure);
    if (found->contains("divergent") && (*found)["divergent"] == true)
      throw CLI::RuntimeError(exit_invalid_input);
  });
}

}  // namespace orch::cli
