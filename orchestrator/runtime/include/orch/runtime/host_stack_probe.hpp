// host_stack_probe: the host's Python stack, read from its interpreter (docs/envs.md). The
// interpreter is asked without importing torch (which takes seconds): torch's version.py names
// its version and its CUDA or HIP build, and is found the way `import torch` would find it.
#pragma once

#include <filesystem>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/host_stack.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

// The interpreter whose stack the envs are built for: [env] python, else ORCH_HOST_PYTHON, else
// /usr/bin/python3 when it exists, else python3 on PATH.
std::filesystem::path host_python(const manifests::deployment& d);

// Errors: "probe_failed" (the interpreter does not run, or answered something unreadable; the
// message names it and says what to fix).
result<manifests::host_stack> probe_host_stack(const std::filesystem::path& python);

}  // namespace orch::runtime
