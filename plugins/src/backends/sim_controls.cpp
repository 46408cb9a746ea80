// The sim device's test controls (docs/sim-device.md): the orch_sim_api the sim
// backend plugin exports as its `extension`. Tests use it to create a device, inject usage and
// faults, freeze the clock, set a process budget, read the counters and reclaim dead processes.
//
// Everything here writes the shared segment, so a control set by one process is seen by every
// process attached to the same device, as tests of several workers need.
#include <cstddef>
#include <cstdint>

#include "backends.hpp"
#include "sim_device.hpp"

namespace orch::plugin_detail {
namespace {

orch_status sim_create(const orch_sim_config* config, int32_t* fd_out) {
  return sim::create_segment(config, fd_out);
}

orch_status sim_set_other_usage(orch_device* dev, uint64_t bytes) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->other.store(bytes);
  return ORCH_OK;
}

orch_status sim_inject_fault(orch_device* dev, uint32_t fault, int32_t count) {
  if (dev == nullptr || fault == 0 || fault >= sim_fault_kinds || count < 0) return ORCH_INVALID;
  dev->seg->faults[fault].store(count);
  return ORCH_OK;
}

orch_status sim_set_clock(orch_device* dev, uint64_t now_ns) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->clock_ns.store(now_ns);
  dev->seg->clock_frozen.store(1, std::memory_order_release);
  return ORCH_OK;
}

orch_status sim_advance_clock(orch_device* dev, uint64_t delta_ns) {
  if (dev == nullptr || dev->seg->clock_frozen.load() == 0) return ORCH_INVALID;
  dev->seg->clock_ns.fetch_add(delta_ns);
  return ORCH_OK;
}

orch_status sim_set_process_budget(orch_device* dev, uint64_t bytes) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->slots[dev->slot].budget.store(bytes);
  return ORCH_OK;
}

orch_status sim_counters(orch_device* dev, orch_sim_counters* out) {
  // Callers built before the appended fields pass a shorter struct_size: they get the prefix.
  if (dev == nullptr || out == nullptr || !ORCH_HAS_FIELD(out, other_bytes)) return ORCH_INVALID;
  const sim_segment* seg = dev->seg;
  out->creates = seg->creates.load();
  out->releases = seg->releases.load();
  out->syncs = seg->syncs.load();
  out->polls = seg->polls.load();
  out->maps = seg->maps.load();
  out->unmaps = seg->unmaps.load();
  out->used_bytes = seg->used.load();
  out->process_used_bytes = sim::process_used(seg);
  out->other_bytes = seg->other.load();
  if (!ORCH_HAS_FIELD(out, process_registered_bytes)) return ORCH_OK;
  out->host_registrations = seg->host_registrations.load();
  out->host_unregistrations = seg->host_unregistrations.load();
  out->registered_bytes = 0;
  out->process_registered_bytes = 0;
  const int32_t pid = sim::self_pid();
  for (const auto& slot : seg->slots) {
    const int32_t owner = slot.pid.load(std::memory_order_acquire);
    if (owner <= 0) continue;
    out->registered_bytes += slot.registered.load();
    if (owner == pid) out->process_registered_bytes += slot.registered.load();
  }
  return ORCH_OK;
}

orch_status sim_reclaim_dead(orch_device* dev, uint64_t* bytes, uint32_t* slots) {
  if (dev == nullptr) return ORCH_INVALID;
  if (bytes != nullptr) *bytes = 0;
  if (slots != nullptr) *slots = 0;
  sim::reclaim_dead_slots(dev->seg, bytes, slots);
  return ORCH_OK;
}

constexpr orch_sim_api sim_control{.struct_size = sizeof(orch_sim_api),
                                   .reserved0 = 0,
                                   .create = sim_create,
                                   .set_other_usage = sim_set_other_usage,
                                   .inject_fault = sim_inject_fault,
                                   .set_clock = sim_set_clock,
                                   .advance_clock = sim_advance_clock,
                                   .set_process_budget = sim_set_process_budget,
                                   .counters = sim_counters,
                                   .reclaim_dead = sim_reclaim_dead};

}  // namespace

const orch_sim_api* sim_control_api() noexcept { return &sim_control; }

}  // namespace orch::plugin_detail
