// comfy-orch: the host CLI. Each subcommand is one cmd_<name>.cpp (see commands.hpp).
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "orch/support/logging.hpp"

int main(int argc, char** argv) {
  orch::init_logging("comfy-orch");
  CLI::App app{
      "comfy-orch: runs ComfyUI custom-node packs in per-env worker processes under one memory "
      "budget.\nLog level: ORCH_LOG_LEVEL (trace, debug, info, warn, error, off).",
      // Named, so that usage lines say `comfy-orch`, not the path it was started by.
      "comfy-orch"};
  app.set_version_flag("--version", std::string("comfy-orch ") + ORCH_VERSION);
  app.require_subcommand(1);
  app.formatter(orch::cli::make_command_help());  // before the commands: each inherits it
  orch::cli::add_diverge_command(app);
  orch::cli::add_doctor_command(app);
  orch::cli::add_envs_command(app);
  orch::cli::add_gateway_command(app);
  orch::cli::add_gc_command(app);
  orch::cli::add_install_command(app);
  orch::cli::add_launch_command(app);
  orch::cli::add_ls_command(app);
  orch::cli::add_plan_command(app);
  orch::cli::add_plugins_command(app);
  orch::cli::add_report_command(app);
  orch::cli::add_run_command(app);
  orch::cli::add_serve_command(app);
  orch::cli::add_status_command(app);
  orch::cli::add_top_command(app);
  orch::cli::add_validate_command(app);
  // After the commands, which would inherit it.
  app.footer("`comfy-orch <command> --help` says what a command does and lists its options.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // usage errors and the RuntimeError exit codes of the subcommands
  } catch (const std::exception& e) {
    // A system limit hit somewhere without a check of its own (the open-file limit inside
    // Boost.Asio, memory under ulimit -v): its cause, never std::terminate.
    std::cerr << "comfy-orch: " << e.what() << '\n'
              << "comfy-orch: if this names a resource (files, memory), check ulimit -n and "
                 "ulimit -v\n";
    return orch::cli::exit_failure;
  }
  return orch::cli::exit_ok;
}
