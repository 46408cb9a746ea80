// env_context: what the env manager's commands (envs, install, doctor, gc) start from: the
// deployment, the host's stack read from its interpreter, and the inventory checked against
// that stack. A stack that cannot be read is said once; envs are then listed unchecked.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/host_stack.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::envs {

struct env_context {
  manifests::deployment deployment;
  manifests::inventory inventory;
  std::filesystem::path host_python;
  std::optional<manifests::host_stack> stack;
  std::string stack_problem;  // why `stack` is absent
};

// Loads `file` (library directories resolved as `run` resolves them) and takes its inventory.
// nullopt when the deployment cannot be loaded; diagnostics go to `diags`.
std::optional<env_context> load_env_context(const std::string& file, manifests::diagnostics& diags);

}  // namespace orch::envs
