// liborch_worker.so is orch::worker linked whole (worker/CMakeLists.txt); a shared library
// target needs one source of its own, and this is it. The exported functions live in
// worker_runtime.cpp and worker_command_line.cpp.
#include "orch/worker/worker.h"
