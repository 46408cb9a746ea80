// `comfy-orch plugins`: a thin CLI shim over orch::plugins::run_plugins_command. The deployment
// file's [plugins] search paths are wired in by the orchestrator when it lands; until then the
// directories come from --dir, $ORCH_PLUGIN_PATH, or the build's plugin directory.
#include <cstdlib>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "orch/plugins/registry.hpp"

namespace orch::cli {

void add_plugins_command(CLI::App& app) {
  struct options {
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto opts = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand("plugins", "List the plugins found and the files skipped");
  cmd->add_option("--dir", opts->dirs, "A plugin directory to scan (repeatable)");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] {
    const auto dirs = orch::plugins::plugin_directories(opts->dirs, ORCH_DEFAULT_PLUGIN_DIR);
    const int rc = orch::plugins::run_plugins_command(dirs, opts->json, std::cout);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orch::cli
