// host_startup: bringing a deployment up, the same way for `comfy-orch run` and for
// liborch_host.so (docs/host-library.md): load and check it, then start its workers and wait for
// them to settle. Every failure names its cause and the fix.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/host_stack.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/runtime/host_runtime.hpp"

namespace orch::runtime {

struct prepared_deployment {
  manifests::deployment deployment;
  manifests::inventory inventory;
  std::optional<manifests::host_stack> stack;  // the host's Python stack, where it was read
};

// Loads `file`, resolves its plugin and library directories, checks it against this machine
// (preflight) and takes the inventory of its packs; warnings and errors go to `diags`.
// Errors: "invalid_deployment" (diags holds the errors), "memory_unreadable".
result<prepared_deployment> prepare_deployment(const std::string& file,
                                               manifests::diagnostics& diags);
// The same for deployment text that is not in a file (a ComfyUI host's, comfyui_deployment.hpp):
// `label` stands for the file in diagnostics, and relative paths resolve against its directory.
result<prepared_deployment> prepare_deployment_text(const std::string& text,
                                                    const std::string& label,
                                                    manifests::diagnostics& diags);

// Raises the open-file limit for its workers, creates the shared memory and spawns the workers.
// Errors: process_limits and host_runtime::start errors, the message ending with the fix.
result<std::unique_ptr<host_runtime>> start_deployment(const prepared_deployment& p,
                                                       const std::string& worker_executable,
                                                       const process::install_layout& layout);

// Waits until every worker is ready or failed (the handshake timeout and 5 s more, in short
// steps) or `stop()` says so.
void settle_workers(host_runtime& h, const std::function<bool()>& stop);

}  // namespace orch::runtime
