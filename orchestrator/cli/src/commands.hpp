// The comfy-orch subcommands; each lives in its own cmd_<name>.cpp and registers itself here,
// through add_command (command_help.hpp): a one-line summary for `comfy-orch --help`, and the
// paragraphs for its own --help.
#pragma once

#include <CLI/CLI.hpp>

#include "command_help.hpp"

namespace orch::cli {

// Exit codes shared by every subcommand.
inline constexpr int exit_ok = 0;
inline constexpr int exit_invalid_input = 1;  // a file, manifest or prompt has an error
inline constexpr int exit_failure = 2;        // the work itself failed

void add_envs_command(CLI::App& app);
// The env manager (docs/envs.md): `install <deployment> [<env>...]`, `doctor <deployment>` and
// `gc <deployment>|--all-known [--delete]`.
void add_install_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_gc_command(CLI::App& app);
// The live tools over a running serve's control socket (docs/cli.md): `status`, `diverge` and
// `ls` (this user's servers).
void add_status_command(CLI::App& app);
void add_diverge_command(CLI::App& app);
void add_ls_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_top_command(CLI::App& app);
// `comfy-orch plan <deployment> [--json]`: what serve or run would decide, starting nothing.
void add_plan_command(CLI::App& app);
// `comfy-orch launch <ComfyUI root> [--python P] [--dry-run] [-- args]` (docs/comfyui.md).
void add_launch_command(CLI::App& app);
void add_validate_command(CLI::App& app);
// `comfy-orch plugins [<deployment>] [--dir DIR]... [--json]` (docs/cli.md).
void add_plugins_command(CLI::App& app);
// `comfy-orch run <deployment> --prompt <api.json> [--json]` (docs/runtime.md).
void add_run_command(CLI::App& app);
// `comfy-orch serve <deployment> [--listen A] [--port N]` (docs/serve.md).
void add_serve_command(CLI::App& app);
// `comfy-orch gateway <fleet.toml> [--listen A] [--port N]` (docs/fleet.md, "The gateway").
void add_gateway_command(CLI::App& app);

}  // namespace orch::cli
