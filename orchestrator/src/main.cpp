#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "orch/support/logging.hpp"

int main(int argc, char** argv) {
  orch::init_logging("comfy-orch");
  CLI::App app{"comfy-orch: multi-process ComfyUI worker orchestrator"};
  app.set_version_flag("--version", std::string("comfy-orch ") + ORCH_VERSION);
  orch::cli::add_plugins_command(app);
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
