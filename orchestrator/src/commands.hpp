// Subcommands of the comfy-orch CLI. Each adds itself to the app; its logic lives in the
// component library it belongs to.
#pragma once

#include <CLI/CLI.hpp>

namespace orch::cli {

// `comfy-orch plugins [--dir DIR]... [--json]` (DESIGN.md §4.4): lists the plugins found.
void add_plugins_command(CLI::App& app);

}  // namespace orch::cli
