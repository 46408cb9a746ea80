#include "env_context.hpp"

#include "host_stack_probe.hpp"
#include "orch/orchestrator/preflight.hpp"

namespace orch::orchestrator {

std::optional<env_context> load_env_context(const std::string& file,
                                            manifests::diagnostics& diags) {
  auto d = manifests::load_deployment(file, diags);
  if (!d) return std::nullopt;
  d->packs.library_paths = deployment_library_directories(*d);
  env_context context;
  context.host_python = host_python(*d);
  if (auto stack = probe_host_stack(context.host_python)) {
    context.stack = *stack;
  } else {
    context.stack_problem = stack.err().message;
  }
  context.inventory =
      manifests::build_inventory(*d, diags, context.stack ? &*context.stack : nullptr);
  context.deployment = std::move(*d);
  return context;
}

}  // namespace orch::orchestrator
