// worker_runtime: one worker process's life (docs/runtime.md):
//   1. receive the control, sim-device and pool segment fds on the fd socket;
//   2. hello (token, pid, protocol, generation) -> the host's settings, read back as one object;
//   3. map the pool, attach the budget slot, load the injected plugins, load the node library;
//   4. publish the control block, start the heartbeat thread, send ready with the node classes;
//   5. serve calls one at a time on the node thread until the host shuts us down or goes away.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "orch/worker/worker.h"

namespace orch::worker {

int run_worker(const orch_worker_options& options);

// A worker whose handshake is under way (steps 1 and 2 above) while its caller builds the node
// set: orch_worker_begin and orch_worker_serve.
class started_worker {
 public:
  virtual ~started_worker() = default;
  // Steps 3 to 5 with `nodes` (or `setup_error`: why there are none); the exit status.
  virtual int serve(const orch_node_set* nodes, const char* setup_error) = 0;
  // orch_worker_message's body (a JSON object, the bytes already in it): 0 sent, 1 dropped,
  // -1 refused.
  virtual int message(nlohmann::json body) = 0;
};
// Null, with the exit status in `status`, when the worker could not begin.
std::unique_ptr<started_worker> begin_worker(const orch_worker_options& options, int& status);

}  // namespace orch::worker
