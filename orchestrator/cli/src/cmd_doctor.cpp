// comfy-orch doctor <deployment> [--json]: whether each Python env and this machine can run the
// deployment (env_doctor.hpp), each problem with its fix; exit 1 on any error.
#include <iostream>

#include "command_host.hpp"
#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/envs/env_doctor.hpp"
#include "orch/process/install_layout.hpp"

namespace orch::cli {
namespace {

using nlohmann::json;

struct doctor_command_options {
  std::string deployment;
  bool json = false;
  double import_timeout_s = 60;
};

int run_doctor(const doctor_command_options& o) {
  manifests::diagnostics diags;
  auto context = envs::load_env_context(o.deployment, diags);
  if (!o.json) print_diagnostics(std::cerr, diags);
  if (!context || diags.has_errors()) {
    if (o.json) std::cout << json{{"diagnostics", diagnostics_to_json(diags)}}.dump(2) << '\n';
    return exit_invalid_input;
  }
  const auto layout = process::this_install_layout();
  envs::doctor_options options;
  options.deployment = o.deployment;
  options.python_package_root = layout.python_package_root;
  options.worker_library = layout.worker_library;
  options.worker_executable = worker_executable();
  options.import_timeout =
      std::chrono::milliseconds(static_cast<long long>(o.import_timeout_s * 1000));

  auto checks = envs::check_machine(*context, options);
  for (const auto& pack : context->inventory.packs) {
    for (const auto& e : pack.envs) {
      if (e.status.native) {
        checks.push_back(
            {e.dir.env_name, "library", e.status.runnable ? "ok" : "error",
             e.status.runnable ? "node library " + e.status.path.string() : e.status.detail,
             e.status.runnable ? "" : "build the pack (./scripts/build)"});
        continue;
      }
      auto env_checks = envs::check_python_env(*context, e, options);
      checks.insert(checks.end(), env_checks.begin(), env_checks.end());
    }
  }
  std::size_t errors = 0;
  std::size_t warnings = 0;
  for (const auto& c : checks) {
    errors += c.status == "error";
    warnings += c.status == "warning";
  }
  if (o.json) {
    json list = json::array();
    for (const auto& c : checks) list.push_back(envs::doctor_check_json(c));
    std::cout << json{{"deployment", o.deployment},
                      {"checks", list},
                      {"errors", errors},
                      {"warnings", warnings},
                      {"diagnostics", diagnostics_to_json(diags)}}
                     .dump(2, ' ', false, json::error_handler_t::replace)
              << '\n';
  } else {
    std::string scope;
    for (const auto& c : checks) {
      if (c.scope != scope) {
        scope = c.scope;
        std::cout << (scope == "machine" ? "machine" : "env " + scope) << ":\n";
      }
      std::cout << "  [" << c.status << "] " << c.check << ": " << c.message << '\n';
      if (!c.fix.empty()) std::cout << "      fix: " << c.fix << '\n';
    }
    std::cout << errors << " error(s), " << warnings << " warning(s)\n";
  }
  return errors > 0 ? exit_invalid_input : exit_ok;
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "doctor", "Check that a deployment can run here",
      "Checks that a deployment can run here. Per Python env: the interpreter runs (its "
      "version), every package the manifest declares imports in the env's own interpreter "
      "(each with a timeout), the stamp matches this host's stack and the manifest, and "
      "comfy_orch imports. For the machine: the host's stack, the device and driver through "
      "its backend plugin, /dev/shm against the pinned pool, the cgroup limit, the plugins "
      "found, and the ComfyUI root. Every problem has a fix line; exit 1 on any error.");
  auto o = std::make_shared<doctor_command_options>();
  cmd->add_option("deployment", o->deployment,
                  "Deployment file (comfy-orch.toml), or a ComfyUI tree (its custom_nodes)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_flag("--json", o->json, "One JSON document: the checks, with the error count");
  cmd->add_option("--import-timeout", o->import_timeout_s,
                  "Seconds each import may take (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->callback([o] {
    if (const int code = run_doctor(*o); code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
