#include "command_host.hpp"

#include <cstdlib>
#include <iostream>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/process/adopted_children.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/runtime/errc.hpp"

namespace orch::cli {

std::string worker_executable() {
  if (const char* e = std::getenv("ORCH_WORKER_EXECUTABLE")) return e;
  return process::this_install_layout().worker_executable.string();
}

std::optional<runtime::prepared_deployment> prepare_for_command(const std::string& file,
                                                                int& exit_code) {
  manifests::diagnostics diags;
  auto prepared = runtime::prepare_deployment(file, diags);
  print_diagnostics(std::cerr, diags);
  if (prepared) return std::move(*prepared);
  std::cerr << prepared.err().message << '\n';
  exit_code = prepared.err().code == runtime::runtime_errc::invalid_deployment ? exit_invalid_input
                                                                               : exit_failure;
  return std::nullopt;
}

std::unique_ptr<runtime::host_runtime> start_for_command(
    const runtime::prepared_deployment& prepared) {
  // The command owns this process: what a worker detaches is re-parented here, and ends with
  // the host (adopted_children.hpp).
  if (!process::adopt_orphans())
    std::cerr << "comfy-orch: cannot adopt what workers detach (no child subreaper here); a "
                 "helper that clears its environment may outlive this command\n";
  auto host =
      runtime::start_deployment(prepared, worker_executable(), process::this_install_layout());
  if (host) return std::move(*host);
  std::cerr << "cannot start the host: [" << host.err().code << "] " << host.err().message << '\n';
  return nullptr;
}

}  // namespace orch::cli
