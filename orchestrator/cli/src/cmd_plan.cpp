// comfy-orch plan <deployment> [--json]: what `serve` or `run` would decide for each env,
// starting no worker (docs/cli.md, "plan").
#include <iostream>
#include <memory>

#include "command_host.hpp"
#include "commands.hpp"
#include "deployment_plan.hpp"
#include "orch/process/install_layout.hpp"

namespace orch::cli {

void add_plan_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "plan", "Show what serve or run would decide, starting nothing",
      "Shows what `serve` or `run` would decide for a deployment, without starting a worker: "
      "the host's device, memory manager and protocol level; for each env its library or "
      "interpreter, device, memory manager and why, the plugins at the host's level with the "
      "settings the adapter drops, and the divergences to expect; and the envs that would run "
      "no worker, with the reason.");
  auto file = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  cmd->add_option("deployment", *file, "Deployment file (comfy-orch.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", *json_out, "The plan document (docs/cli.md) instead of the text");
  cmd->callback([file, json_out] {
    int code = exit_ok;
    const auto prepared = prepare_for_command(*file, code);
    if (!prepared) throw CLI::RuntimeError(code);
    const auto layout = process::this_install_layout();
    auto plan = plan_deployment(*prepared, worker_executable(), !layout.worker_library.empty());
    if (!plan) {
      std::cerr << "comfy-orch plan: " << plan.err().message << '\n';
      throw CLI::RuntimeError(exit_failure);
    }
    if (*json_out) {
      std::cout << plan->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      std::cout << format_plan(*plan);
    }
  });
}

}  // namespace orch::cli
