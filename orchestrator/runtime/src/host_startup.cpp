#include "orch/runtime/host_startup.hpp"

#include <optional>

#include <spdlog/spdlog.h>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/manifests/units.hpp"
#include "orch/process/process_limits.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/runtime/host_stack_probe.hpp"
#include "orch/runtime/preflight.hpp"

namespace orch::runtime {

namespace {

result<prepared_deployment> prepare(std::optional<manifests::deployment> d, const error& invalid,
                                    manifests::diagnostics& diags) {
  if (!d) return invalid;
  d->plugin_paths = deployment_plugin_directories(*d);
  d->packs.library_paths = deployment_library_directories(*d);
  auto readings = ipc::probe_memory_readings();
  if (!readings) {
    return error{runtime_errc::memory_unreadable,
                 "cannot read this machine's memory: " + readings.err().message};
  }
  preflight(*d, *readings, diags);
  // Envs built for another stack are refused (env_workspace.hpp); without the host's stack
  // they are started unchecked, as comfy-env starts an unstamped env.
  auto stack = probe_host_stack(host_python(*d));
  auto inv = manifests::build_inventory(*d, diags, stack ? &*stack : nullptr);
  bool python_envs = false;
  for (const auto& pack : inv.packs) {
    for (const auto& e : pack.envs) python_envs = python_envs || !e.status.native;
  }
  if (!stack && python_envs) spdlog::warn("env stamps are not checked: {}", stack.err().message);
  if (diags.has_errors()) return invalid;
  return prepared_deployment{std::move(*d), std::move(inv),
                             stack ? std::optional(std::move(*stack)) : std::nullopt};
}

}  // namespace

result<prepared_deployment> prepare_deployment(const std::string& file,
                                               manifests::diagnostics& diags) {
  const error invalid{runtime_errc::invalid_deployment, "nothing started: fix the errors in " +
                                                            file + " (comfy-orch validate " + file +
                                                            " lists them)"};
  return prepare(manifests::load_deployment(file, diags), invalid, diags);
}

result<prepared_deployment> prepare_deployment_text(const std::string& text,
                                                    const std::string& label,
                                                    manifests::diagnostics& diags) {
  const error invalid{runtime_errc::invalid_deployment,
                      "nothing started: fix the errors in the deployment of " + label};
  return prepare(manifests::parse_deployment_text(text, label, diags), invalid, diags);
}

result<std::unique_ptr<host_runtime>> start_deployment(const prepared_deployment& p,
                                                       const std::string& worker_executable,
                                                       const process::install_layout& layout) {
  std::size_t env_count = 0;
  for (const auto& pack : p.inventory.packs) env_count += pack.envs.size();
  if (auto st = process::ensure_open_file_limit(process::descriptors_needed(env_count)); !st)
    return st.err();
  auto host = host_runtime::start(
      p.deployment, p.inventory,
      {worker_executable, 64, layout.worker_library, layout.python_package_root});
  if (!host && host.err().code == ipc::shm_errc::map_failed) {
    return error{host.err().code,
                 host.err().message + "\nfix: the pinned pool (" +
                     manifests::format_size(p.deployment.shm.pinned_pool_size) +
                     ") and the device segments must fit this process's address space and "
                     "memory: check ulimit -v, or lower [shm] pinned_pool_size"};
  }
  return host;
}

void settle_workers(host_runtime& h, const std::function<bool()>& stop) {
  const auto settle_by = std::chrono::steady_clock::now() +
                         h.deployment().workers.handshake_timeout + std::chrono::seconds(5);
  while (!h.wait_settled(std::chrono::milliseconds(50)) && !stop() &&
         std::chrono::steady_clock::now() < settle_by) {
  }
}

}  // namespace orch::runtime
