// worker_runtime: one worker process's life (docs/runtime.md):
//   1. receive the control, sim-device and pool segment fds on the fd socket;
//   2. hello (token, pid, protocol, generation) -> the host's settings, read back as one object;
//   3. map the pool, attach the budget slot, load the injected plugins, load the node library;
//   4. publish the control block, start the heartbeat thread, send ready with the node classes;
//   5. serve calls one at a time on the node thread until the host shuts us down or goes away.
#pragma once

#include "orch/worker/worker.h"

namespace orch::worker {

int run_worker(const orch_worker_options& options);

}  // namespace orch::worker
