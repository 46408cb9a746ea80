// comfy-orch: the host CLI. Each subcommand is one cmd_<name>.cpp (see commands.hpp).
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "orch/support/logging.hpp"

int main(int argc, char** argv) {
  orch::init_logging("comfy-orch");
  CLI::App app{
      "comfy-orch: runs ComfyUI custom-node packs in per-env worker processes under one memory "
      "budget.\nLog level: ORCH_LOG_LEVEL (trace, debug, info, warn, error, off)."};
  app.set_version_flag("--version", std::string("comfy-orch ") + ORCH_VERSION);
  app.require_subcommand(1);
  orch::cli::add_envs_command(app);
  orch::cli::add_plugins_command(app);
  orch::cli::add_run_command(app);
  orch::cli::add_validate_command(app);
  CLI11_PARSE(app, argc, argv);
  return orch::cli::exit_ok;
}
