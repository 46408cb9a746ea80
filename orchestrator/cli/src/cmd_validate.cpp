// comfy-orch validate <file>...: checks deployments and pack manifests without running anything.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/ipc/cgroup_probe.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/manifests/validate.hpp"
#include "orch/runtime/preflight.hpp"

namespace orch::cli {

void add_validate_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "validate", "Check deployment files and pack manifests",
      "Validate deployment files and pack manifests. A file's role is decided by its name: "
      "*comfy-env-root.toml is a pack-root manifest, *comfy-env.toml an env manifest, anything "
      "else a deployment (validated together with its packs, and against this machine as "
      "`run` would: plugin directories, the device's backend plugin, the pinned pool against "
      "the machine's budget). Prints every warning and error "
      "with file:line:column and key; exits 1 if any file has an error.");
  struct options {
    std::vector<std::string> files;
    bool json = false;
    bool quiet = false;
  };
  auto opts = std::make_shared<options>();
  cmd->add_option("files", opts->files, "Files to validate")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--json", opts->json, "Print one JSON document (schema: docs/cli.md)");
  cmd->add_flag("-q,--quiet", opts->quiet, "Print errors only");
  cmd->callback([opts] {
    auto report = nlohmann::json::array();
    bool any_error = false;
    const auto readings = ipc::probe_memory_readings();
    for (const auto& file : opts->files) {
      auto diags = manifests::validate_file(file);
      // A deployment is also checked against this machine, as `run` will (preflight.hpp).
      if (manifests::role_of(file) == manifests::file_role::deployment && !diags.has_errors()) {
        manifests::diagnostics scratch;
        if (auto d = manifests::load_deployment(file, scratch)) {
          d->plugin_paths = runtime::deployment_plugin_directories(*d);
          if (readings) runtime::preflight(*d, *readings, diags);
        }
      }
      any_error = any_error || diags.has_errors();
      report.push_back({{"file", file},
                        {"role", manifests::to_string(manifests::role_of(file))},
                        {"valid", !diags.has_errors()},
                        {"errors", diags.count(manifests::severity::error)},
                        {"warnings", diags.count(manifests::severity::warning)},
                        {"diagnostics", diagnostics_to_json(diags)}});
      if (!opts->json) {
        for (const auto& d : diags.items()) {
          if (!opts->quiet || d.level == manifests::severity::error) {
            std::cout << d.format() << '\n';
          }
        }
        std::cout << file << ": " << (diags.has_errors() ? "INVALID" : "ok") << " ("
                  << manifests::to_string(manifests::role_of(file)) << ", "
                  << diags.count(manifests::severity::error) << " error(s), "
                  << diags.count(manifests::severity::warning) << " warning(s))\n";
      }
    }
    if (opts->json) std::cout << nlohmann::json{{"files", report}}.dump(2) << '\n';
    if (any_error) throw CLI::RuntimeError(exit_invalid_input);
  });
}

}  // namespace orch::cli
