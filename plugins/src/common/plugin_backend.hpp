// The backend a plugin is compiled for, from the one ORCH_PLUGIN_BACKEND_* definition its
// CMake target sets (plugins/CMakeLists.txt), so each plugin entry file names itself as
// ORCH_PLUGIN_BACKEND_NAME "-<kind>" instead of repeating the chain.
#pragma once

#include "orch/plugin/plugin.h"

#if defined(ORCH_PLUGIN_BACKEND_SIM)
#define ORCH_PLUGIN_BACKEND_NAME "sim"
#define ORCH_PLUGIN_BACKEND_KIND ORCH_BACKEND_SIM
#elif defined(ORCH_PLUGIN_BACKEND_CPU)
#define ORCH_PLUGIN_BACKEND_NAME "cpu"
#define ORCH_PLUGIN_BACKEND_KIND ORCH_BACKEND_CPU
#elif defined(ORCH_PLUGIN_BACKEND_CUDA)
#define ORCH_PLUGIN_BACKEND_NAME "cuda"
#define ORCH_PLUGIN_BACKEND_KIND ORCH_BACKEND_CUDA
#elif defined(ORCH_PLUGIN_BACKEND_HIP)
#define ORCH_PLUGIN_BACKEND_NAME "hip"
#define ORCH_PLUGIN_BACKEND_KIND ORCH_BACKEND_HIP
#else
#error "define one ORCH_PLUGIN_BACKEND_*"
#endif
