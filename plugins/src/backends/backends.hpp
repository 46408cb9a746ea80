// The backend implementations built into plugins (docs/references.md, aimdo §6.2). Each returns a
// static vtable; the backend plugins export them directly, and pager plugins drive them through
// the backend-agnostic policy.
#pragma once

#include "orch/plugin/backend.h"
#include "orch/plugin/levels.h"
#include "orch/plugin/sim.h"

namespace orch::plugin_detail {

const orch_backend_api* cpu_backend_api() noexcept;
const orch_backend_api* sim_backend_api() noexcept;
const orch_sim_api* sim_control_api() noexcept;
#ifdef ORCH_WITH_CUDA_BACKEND
const orch_backend_api* cuda_backend_api() noexcept;
// The driver the cuda backend found (version and file), or why it found none it can use.
const char* cuda_driver_summary() noexcept;
#endif
#ifdef ORCH_WITH_HIP_BACKEND
const orch_backend_api* hip_backend_api() noexcept;
// The ROCm runtime the hip backend took (version and file), or what it found and why it refused.
const char* hip_runtime_summary() noexcept;
#endif

}  // namespace orch::plugin_detail
