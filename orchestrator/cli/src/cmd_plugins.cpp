// comfy-orch plugins [<deployment>] [--dir DIR]... [--json]: the plugins a deployment would
// inject, and every file in its plugin directories that was skipped, with the reason.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/plugins/registry.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/runtime/preflight.hpp"

namespace orch::cli {

void add_plugins_command(CLI::App& app) {
  struct options {
    std::string deployment;
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto opts = std::make_shared<options>();
  CLI::App* cmd = add_command(
      app, "plugins", "List the pager, allocator and backend plugins found",
      "List the pager, allocator and backend plugins found (kind, backend, version, protocol "
      "level range, capabilities) and every file skipped, with its problem. Directories: those "
      "`run` reads for the deployment (its [plugins] search_paths, else $ORCH_PLUGIN_PATH, "
      "else the plugin directory installed or built with comfy-orch) and each --dir; with "
      "neither, $ORCH_PLUGIN_PATH, else that plugin directory. Only files named orch-*.so are "
      "loaded. Exits 1 when no plugin is found.");
  cmd->add_option("deployment", opts->deployment, "Deployment file whose [plugins] to scan")
      ->check(CLI::ExistingFile);
  cmd->add_option("--dir", opts->dirs, "A plugin directory to scan (repeatable)");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table (schema: docs/cli.md)");
  cmd->callback([opts] {
    std::vector<std::string> dirs = opts->dirs;
    if (!opts->deployment.empty()) {
      manifests::diagnostics diags;
      const auto d = manifests::load_deployment(opts->deployment, diags);
      print_diagnostics(std::cerr, diags);
      if (!d) throw CLI::RuntimeError(exit_invalid_input);
      // The directories `run` reads for this deployment (preflight.hpp), then any --dir.
      std::vector<std::string> with_deployment;
      for (const auto& p : runtime::deployment_plugin_directories(*d)) {
        with_deployment.push_back(p.string());
      }
      dirs.insert(dirs.begin(), with_deployment.begin(), with_deployment.end());
    }
    const auto directories =
        plugins::plugin_directories(dirs, process::this_install_layout().plugin_directory);
    const plugins::registry_report report = plugins::scan_directories(directories);
    if (opts->json)
      // replace: a second line of defence behind validate_table; dump() throws on invalid UTF-8.
      std::cout << plugins::to_json(report).dump(2, ' ', false,
                                                 nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      std::cout << plugins::format_table(report);
    if (report.plugins.empty()) throw CLI::RuntimeError(1);  // as its help says
  });
}

}  // namespace orch::cli
