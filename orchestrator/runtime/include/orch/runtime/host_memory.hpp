// host_memory: the shared memory the host creates once per run and lends every worker
// (docs/shared-memory.md): its place in the machine's pinned-budget ledger (one budget for
// every host on the machine), the control segment (the pinned budget's grants, a slot and a
// control block per process), the pinned pool with its lease table (the host is their only
// writer), and,
// the host's device opened through its backend plugin (the pool's segments are registered with
// it, so they are page-locked on GPUs) and, on sim, the simulated device every process attaches
// to (docs/sim-device.md).
//
// Not thread-safe: the host touches it from its io thread only (docs/runtime.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/lease_table.hpp"
#include "orch/ipc/machine_ledger.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/pinned_pool.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/plugins/backend_device.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

// The host's own lease holder and budget slot.
inline constexpr std::uint32_t host_slot = 0;

// The host's device alone, opened through its backend plugin as host_memory opens it (null on
// cpu without a plugin; a sim device gets a segment of its own): what `comfy-orch plan` reads,
// without a pool, a control segment or a share of the machine's budget.
struct host_device {
  std::unique_ptr<plugins::backend_device> device;
  ipc::unique_fd sim_fd;
};
result<host_device> open_host_device(const manifests::deployment& d);

class host_memory {
 public:
  // `slots` counts the host and every worker generation alive at once. The pool is one segment
  // of [shm] pinned_pool_size, created now so workers can map it at their handshake. The host
  // joins the machine ledger (ORCH_MACHINE_LEDGER_NAME, else /comfy-orch-budget-<uid>) first:
  // a pool that does not fit what the machine's other hosts leave is refused here
  // ("machine_budget_exceeded", naming those hosts and the fix).
  static result<std::unique_ptr<host_memory>> create(const manifests::deployment& d,
                                                     std::uint32_t slots);
  host_memory(const host_memory&) = delete;
  host_memory& operator=(const host_memory&) = delete;
  ~host_memory();

  ipc::control_segment& control() noexcept { return *control_; }
  ipc::budget_account& host_budget() noexcept { return *budget_; }
  ipc::pinned_pool& pool() noexcept { return *pool_; }
  ipc::lease_table& leases() noexcept { return *leases_; }
  int sim_fd() const noexcept { return sim_fd_.get(); }  // -1 off sim
  // The host's backend device; nullptr on cpu when its plugin is not in the search paths.
  plugins::backend_device* backend() noexcept { return backend_.get(); }
  // The backend plugin each worker opens its device with (the handshake's backend_plugin): it
  // registers the pool there unless pinning is off, and a ledger worker's models live there.
  // Empty only on cpu without the plugin.
  std::string backend_plugin() const;
  std::uint64_t budget_bytes() const noexcept { return control_->budget(); }

  // A worker's pinned_grant request: grows slot `slot`'s grant by `shortfall` (and a little
  // slack, so its next small reservations need no message). Errors: those of grow_grant.
  result<std::uint64_t> grant(std::uint32_t slot, std::uint64_t shortfall);
  // The machine ledger; nullptr when /dev/shm could not hold one (logged: this host then keeps
  // only its own budget).
  ipc::machine_ledger* ledger() noexcept { return ledger_ ? &*ledger_ : nullptr; }
  // The pool stays mapped for the rest of the process, whatever is destroyed later: a library
  // caller kept views of its blocks past the host's stop (docs/host-library.md). Reading them
  // then reads stale bytes, never unmapped memory. Call only as the host stops.
  void keep_pool_mapped() noexcept;

 private:
  host_memory() = default;
  // Declared first: the control segment tells it its last total when the host slot goes.
  std::optional<ipc::machine_ledger> ledger_;
  std::optional<ipc::control_segment> control_;
  std::unique_ptr<ipc::budget_account> budget_;
  ipc::unique_fd sim_fd_;
  std::unique_ptr<plugins::backend_device> backend_;
  std::unique_ptr<ipc::pin_registrar> registrar_;
  std::unique_ptr<ipc::pinned_pool> pool_;
  std::unique_ptr<ipc::lease_table> leases_;
};

}  // namespace orch::runtime
