// The targets every conformance suite is instantiated for. Paths come from the build
// ($<TARGET_FILE:...>), so the suites load exactly the plugins just built.
#pragma once

#include "harness.hpp"

namespace orch::test {

// A plugin that is not built for this machine is nullptr; its target then skips.
#ifndef ORCH_TEST_PLUGIN_BACKEND_SIM
#define ORCH_TEST_PLUGIN_BACKEND_SIM nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_BACKEND_CPU
#define ORCH_TEST_PLUGIN_BACKEND_CPU nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_BACKEND_CUDA
#define ORCH_TEST_PLUGIN_BACKEND_CUDA nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_BACKEND_HIP
#define ORCH_TEST_PLUGIN_BACKEND_HIP nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_PAGER_SIM
#define ORCH_TEST_PLUGIN_PAGER_SIM nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_PAGER_CPU
#define ORCH_TEST_PLUGIN_PAGER_CPU nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_PAGER_CUDA
#define ORCH_TEST_PLUGIN_PAGER_CUDA nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_PAGER_HIP
#define ORCH_TEST_PLUGIN_PAGER_HIP nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_ALLOCATOR_SIM
#define ORCH_TEST_PLUGIN_ALLOCATOR_SIM nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_ALLOCATOR_CPU
#define ORCH_TEST_PLUGIN_ALLOCATOR_CPU nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_ALLOCATOR_CUDA
#define ORCH_TEST_PLUGIN_ALLOCATOR_CUDA nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_ALLOCATOR_HIP
#define ORCH_TEST_PLUGIN_ALLOCATOR_HIP nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_LEDGER_SIM
#define ORCH_TEST_PLUGIN_LEDGER_SIM nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_LEDGER_CPU
#define ORCH_TEST_PLUGIN_LEDGER_CPU nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_LEDGER_CUDA
#define ORCH_TEST_PLUGIN_LEDGER_CUDA nullptr
#endif
#ifndef ORCH_TEST_PLUGIN_LEDGER_HIP
#define ORCH_TEST_PLUGIN_LEDGER_HIP nullptr
#endif

struct sim_target {
  static target get() {
    return {"sim", ORCH_BACKEND_SIM, ORCH_TEST_PLUGIN_BACKEND_SIM, ORCH_TEST_PLUGIN_PAGER_SIM,
            ORCH_TEST_PLUGIN_ALLOCATOR_SIM, ORCH_TEST_PLUGIN_LEDGER_SIM};
  }
};
struct cpu_target {
  static target get() {
    return {"cpu", ORCH_BACKEND_CPU, ORCH_TEST_PLUGIN_BACKEND_CPU, nullptr,
            ORCH_TEST_PLUGIN_ALLOCATOR_CPU, ORCH_TEST_PLUGIN_LEDGER_CPU};
  }
};
struct cuda_target {
  static target get() {
    return {"cuda", ORCH_BACKEND_CUDA, ORCH_TEST_PLUGIN_BACKEND_CUDA, ORCH_TEST_PLUGIN_PAGER_CUDA,
            ORCH_TEST_PLUGIN_ALLOCATOR_CUDA, ORCH_TEST_PLUGIN_LEDGER_CUDA};
  }
};
struct hip_target {
  static target get() {
    return {"hip", ORCH_BACKEND_HIP, ORCH_TEST_PLUGIN_BACKEND_HIP, ORCH_TEST_PLUGIN_PAGER_HIP,
            ORCH_TEST_PLUGIN_ALLOCATOR_HIP, ORCH_TEST_PLUGIN_LEDGER_HIP};
  }
};

}  // namespace orch::test
