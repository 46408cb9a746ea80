// worker_specs: what the host decides for each env of a deployment before any worker starts
// (docs/runtime.md): the native library or the Python interpreter, the device, the memory
// settings as that device takes them, the backend plugin and the plugins at the host's level
// (memory_plan::choose_for), the call timeout; or why the env runs no worker. `comfy-orch serve`
// and `run` spawn from it, and `comfy-orch plan` shows it without spawning anything.
#pragma once

#include <string>
#include <vector>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/runtime/memory_plan.hpp"
#include "orch/runtime/supervisor.hpp"

namespace orch::runtime {

struct skipped_env {
  std::string env;
  std::string reason;
};

struct planned_workers {
  std::vector<worker_spec> specs;
  std::vector<skipped_env> skipped;
};

// `host_backend_plugin` is the host's own device's backend plugin (a worker on that kind of
// device shares it); `python_workers` whether this host can start Python workers (it knows
// where liborch_worker.so is). Warns, naming the env, of a pager signal that is neither true nor
// false, and of a [worker] device this host cannot reach.
planned_workers plan_workers(const manifests::deployment& d, const manifests::inventory& inv,
                             memory_plan& plan, const std::string& host_backend_plugin,
                             bool python_workers, const process::environment& operator_env);

}  // namespace orch::runtime
