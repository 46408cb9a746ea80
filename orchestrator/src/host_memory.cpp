#include "orch/orchestrator/host_memory.hpp"

#include <unistd.h>

#include "orch/ipc/budget.hpp"
#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/plugin/sim.h"
#include "orch/plugins/names.hpp"

namespace orch::orchestrator {
namespace {

result<ipc::unique_fd> create_sim_device(const manifests::deployment& d,
                                         std::unique_ptr<plugins::plugin_library>& backend) {
  std::filesystem::path path;
  for (const auto& dir : d.plugin_paths) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / "orch-backend-sim.so", ec)) {
      path = dir / "orch-backend-sim.so";
      break;
    }
  }
  if (path.empty()) {
    return error{"not_found",
                 "the sim device needs orch-backend-sim.so in [plugins] search_paths; build the "
                 "plugins or fix the path"};
  }
  auto lib = plugins::plugin_library::open(path, false);
  if (!lib) return lib.err();
  if (auto st = (*lib)->init(); !st) return st.err();
  const auto* sim = static_cast<const orch_sim_api*>((*lib)->table().extension);
  if (sim == nullptr) return error{"invalid_plugin", path.string() + " has no sim controls"};
  orch_sim_config sc{};
  sc.struct_size = sizeof(sc);
  sc.capacity = d.host.sim.capacity;
  sc.granularity = d.host.sim.page_size;
  sc.free_mode = d.host.sim.mode == manifests::free_memory_mode::device ? ORCH_SIM_FREE_DEVICE
                                                                        : ORCH_SIM_FREE_PROCESS;
  int32_t fd = -1;
  if (const orch_status st = sim->create(&sc, &fd); st != ORCH_OK) {
    return error{"sim_failed", std::string("creating the sim device answered ") +
                                   plugins::status_name(st)};
  }
  backend = std::move(*lib);
  return ipc::unique_fd(fd);
}

}  // namespace

result<std::unique_ptr<host_memory>> host_memory::create(const manifests::deployment& d,
                                                         std::uint32_t slots) {
  std::unique_ptr<host_memory> m(new host_memory());
  auto readings = ipc::probe_memory_readings();
  if (!readings) return readings.err();
  const auto budget = ipc::compute_pinned_budget(*readings);
  auto control = ipc::control_segment::create(budget.bytes, slots);
  if (!control) return control.err();
  m->control_.emplace(std::move(*control));
  auto self = ipc::read_process_identity(::getpid());
  if (!self) return self.err();
  auto slot = m->control_->claim_slot(*self);
  if (!slot) return slot.err();
  if (*slot != host_slot) return error{"bad_slot", "the host did not get slot 0"};
  m->budget_ = std::make_unique<ipc::budget_account>(*m->control_, host_slot);
  ipc::pool_options po;
  po.segment_data_size = d.shm.pinned_pool_size;
  po.max_segments = 1;
  m->pool_ = std::make_unique<ipc::pinned_pool>(po, m->registrar_, m->budget_.get());
  // Create the segment now: workers map it at their handshake, before any call.
  auto probe = m->pool_->allocate(po.granule);
  if (!probe) return probe.err();
  if (auto st = m->pool_->deallocate(*probe); !st) return st.err();
  m->leases_ = std::make_unique<ipc::lease_table>(*m->pool_);
  if (d.host.device.kind == manifests::device_kind::sim) {
    auto fd = create_sim_device(d, m->sim_backend_);
    if (!fd) return fd.err();
    m->sim_fd_ = std::move(*fd);
  }
  return m;
}

host_memory::~host_memory() {
  leases_.reset();
  pool_.reset();
  sim_fd_.reset();
  sim_backend_.reset();
  if (control_) control_->reclaim_slot(host_slot);
}

}  // namespace orch::orchestrator
