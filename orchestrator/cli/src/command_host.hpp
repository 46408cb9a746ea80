// command_host: what `run` and `serve` do alike to bring their deployment up (docs/cli.md): load
// and check it with every diagnostic printed, then start its workers with this install's worker
// executable, printing the cause of a failure.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"

namespace orch::cli {

// $ORCH_WORKER_EXECUTABLE, else the comfy-orch-worker installed or built with this host
// (install_layout.hpp).
std::string worker_executable();

// The deployment, or nullopt with `exit_code` set (1 for an invalid deployment, 2 otherwise);
// warnings and errors go to stderr either way, so a pack dropped for a bad manifest never
// vanishes without a word.
std::optional<runtime::prepared_deployment> prepare_for_command(const std::string& file,
                                                                int& exit_code);

// The host with its workers spawned, or null after printing why it could not start. The process
// becomes a child subreaper first (adopted_children.hpp).
std::unique_ptr<runtime::host_runtime> start_for_command(
    const runtime::prepared_deployment& prepared);

}  // namespace orch::cli
