#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORCH_HAS_LSAN 1
#include <sanitizer/lsan_interface.h>
#endif
#endif
#ifndef ORCH_HAS_LSAN
#define ORCH_HAS_LSAN 0
#endif

#include "orch/runtime/host_memory.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/ipc/pinned_budget.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/plugin/sim.h"
#include "orch/plugins/backend_pin_registrar.hpp"
#include "orch/runtime/errc.hpp"

namespace orch::runtime {

namespace {

// An object kept on purpose until the process ends, which LeakSanitizer must not report.
void ignore_leak([[maybe_unused]] const void* object) noexcept {
#if ORCH_HAS_LSAN
  __lsan_ignore_object(object);
#endif
}

}  // namespace

namespace {

// The host's device, opened through its backend plugin before the pool exists so the pool's
// segments are registered with it (docs/shared-memory.md). On sim the device segment is made here,
// once per run, and passed to every worker.
status open_backend(const manifests::deployment& d, std::unique_ptr<plugins::backend_device>& out,
                    ipc::unique_fd& sim_fd) {
  const std::string backend = manifests::to_string(d.host.device.kind);
  const std::string file = plugins::backend_plugin_file(backend);
  const auto path = plugins::find_backend_plugin(backend, d.plugin_paths);
  if (path.empty()) {
    // Without a device there is nothing to page-lock for: cpu runs without its plugin.
    if (d.host.device.kind == manifests::device_kind::cpu) return ok_status();
    return error{runtime_errc::not_found,
                 "device " + d.host.device.to_string() + " needs " + file +
                     " in [plugins] search_paths; build the plugins or fix the path"};
  }
  if (d.host.device.kind == manifests::device_kind::sim) {
    orch_sim_config sc{};
    sc.struct_size = sizeof(sc);
    sc.capacity = d.host.sim.capacity;
    sc.granularity = d.host.sim.page_size;
    sc.free_mode = d.host.sim.mode == manifests::free_memory_mode::device ? ORCH_SIM_FREE_DEVICE
                                                                          : ORCH_SIM_FREE_PROCESS;
    sc.runtime_version = d.host.sim.runtime.major << 16 | d.host.sim.runtime.minor;
    int fd = -1;
    auto dev = plugins::backend_device::create_sim(path, sc, &fd);
    if (!dev) return dev.err();
    sim_fd = ipc::unique_fd(fd);
    out = std::move(*dev);
    return ok_status();
  }
  auto dev = plugins::backend_device::open(path, d.host.device.index, -1);
  if (!dev) return dev.err();
  out = std::move(*dev);
  return ok_status();
}

// What a worker's grant grows by beyond what it asked: enough that a node's next small
// reservations stay on the lock-free path, small enough that idle grants strand little.
std::uint64_t grant_slack(std::uint64_t budget) {
  return std::min<std::uint64_t>(32ull << 20, budget / 64);
}

}  // namespace

result<host_device> open_host_device(const manifests::deployment& d) {
  host_device out;
  if (auto st = open_backend(d, out.device, out.sim_fd); !st) return st.err();
  return out;
}

result<std::unique_ptr<host_memory>> host_memory::create(const manifests::deployment& d,
                                                         std::uint32_t slots) {
  std::unique_ptr<host_memory> m(new host_memory());
  auto readings = ipc::probe_memory_readings();
  if (!readings) return readings.err();
  const auto budget = ipc::compute_pinned_budget(*readings);
  // One budget per machine (docs/shared-memory.md): every grant given here is first reserved in
  // the machine ledger, which the other hosts of this user share.
  auto ledger = ipc::machine_ledger::join(ipc::machine_ledger::default_name(), budget.bytes);
  if (ledger) {
    m->ledger_.emplace(std::move(*ledger));
  } else if (ledger.err().code == ipc::budget_errc::ledger_failed) {
    spdlog::warn(
        "budget: no machine-wide pinned budget ({}); this host keeps to its own budget "
        "and does not see other hosts on this machine",
        ledger.err().message);
  } else {
    return ledger.err();
  }
  auto control = ipc::control_segment::create(budget.bytes, slots);
  if (!control) return control.err();
  m->control_.emplace(std::move(*control));
  if (m->ledger_) {
    m->control_->set_grant_limit(
        [ledger = &*m->ledger_](std::uint64_t total) { return ledger->reserve(total); });
  }
  auto self = ipc::read_process_identity(::getpid());
  if (!self) return self.err();
  auto slot = m->control_->claim_slot(*self);
  if (!slot) return slot.err();
  if (*slot != host_slot) return error{runtime_errc::bad_slot, "the host did not get slot 0"};
  m->control_->take_slot_fd(host_slot).reset();  // mapped; nobody else may ever open it
  m->budget_ = std::make_unique<ipc::budget_account>(*m->control_, host_slot);
  // The host is its own grant source: no message, the same rules as a worker's request.
  m->budget_->set_grant_source([control = &*m->control_](std::uint64_t shortfall) -> status {
    auto grown = control->grow_grant(host_slot, shortfall);
    if (!grown) return grown.err();
    return ok_status();
  });
  if (auto st = open_backend(d, m->backend_, m->sim_fd_); !st) return st.err();
  if (m->backend_ && !d.memory.disable_pinned_memory) {
    m->registrar_ = std::make_unique<plugins::backend_pin_registrar>(
        m->backend_->api(), m->backend_->device(), m->backend_->backend());
  } else {
    m->registrar_ = std::make_unique<ipc::noop_pin_registrar>();
  }
  ipc::pool_options po;
  po.segment_data_size = d.shm.pinned_pool_size;
  po.max_segments = 1;
  m->pool_ = std::make_unique<ipc::pinned_pool>(po, *m->registrar_, m->budget_.get());
  // Create the segment now: workers map it at their handshake, before any call.
  auto probe = m->pool_->allocate(po.granule);
  if (!probe && probe.err().code == ipc::budget_errc::machine_budget_exceeded) {
    return error{probe.err().code, "the pinned pool ([shm] pinned_pool_size = " +
                                       std::to_string(po.segment_data_size >> 20) +
                                       " MiB) cannot start: " + probe.err().message};
  }
  if (!probe) return probe.err();
  if (auto st = m->pool_->deallocate(*probe); !st) return st.err();
  m->leases_ = std::make_unique<ipc::lease_table>(*m->pool_);
  return m;
}

result<std::uint64_t> host_memory::grant(std::uint32_t slot, std::uint64_t shortfall) {
  return control_->grow_grant(slot, shortfall, grant_slack(control_->budget()));
}

std::string host_memory::backend_plugin() const {
  return backend_ ? backend_->library().path().string() : std::string();
}

void host_memory::keep_pool_mapped() noexcept {
  // Never destroyed, so never unmapped: the objects are unreachable from here on, and nothing
  // they point to is touched again. LeakSanitizer is told so: it is no leak.
  ignore_leak(leases_.release());
  ignore_leak(pool_.release());
  ignore_leak(registrar_.release());
}

host_memory::~host_memory() {
  // The pool's segments unregister from the device before it closes (backend_pin_registrar.hpp).
  leases_.reset();
  pool_.reset();
  registrar_.reset();
  backend_.reset();
  sim_fd_.reset();
  if (control_) control_->reclaim_slot(host_slot);
  control_.reset();
  ledger_.reset();  // leaves the machine ledger
}

}  // namespace orch::runtime
