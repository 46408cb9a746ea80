// python_worker_command: how the host starts a Python env's worker (docs/python.md). The env's
// interpreter runs the comfy_orch package's worker, found by putting the package's folder first
// on sys.path (no install needed), over liborch_worker.so (ORCH_WORKER_LIBRARY). The process
// environment follows python_environment.hpp's rule; cwd is the pack directory.
// A pixi env starts through `pixi run --as-is --manifest-path <env>/pixi.toml -e default python`.
// A pure function of its inputs, tested without spawning anything.
#pragma once

#include "orch/process/child_process.hpp"
#include "orch/process/worker_environment.hpp"
#include "orch/runtime/supervisor.hpp"

namespace orch::runtime {

// Sets `request`'s executable and working directory, puts the interpreter's arguments before
// the worker flags already in request.args, and shapes `env`.
void python_worker_command(const python_worker_spec& spec, const supervisor_options& options,
                           process::spawn_request& request, process::environment& env);

}  // namespace orch::runtime
