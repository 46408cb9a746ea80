// The sim device's shared control block (docs/sim-device.md), and the
// operations on it (sim_segment.cpp).
//
// It lives in a memfd segment mapped MAP_SHARED by every attached process. Only fixed-width
// fields and lock-free atomics: a process that dies mid-call can corrupt nothing and leaves no
// lock held (docs/sim-device.md). Physical bookkeeping that needs more than a counter
// (handles, mappings, backing store) stays process-local in the backend (sim_device.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "orch/plugin/sim.h"

namespace orch::plugin_detail {

inline constexpr uint64_t sim_magic = 0x4f52434853494d31ull;  // "ORCHSIM1"
// 2: slots carry the owner's start time; 3: host registrations are counted; 5: 1024 slots
inline constexpr uint32_t sim_version = 5;
// A real GPU has no per-device cap on processes, and each worker holds a slot per attached
// module (backend, allocator, pager): 1024 slots keep 300 workers on one device (40 KiB).
inline constexpr uint32_t sim_max_slots = 1024;
inline constexpr uint32_t sim_fault_kinds = 8;

// One attached process. pid 0 means free, sim_slot_reclaiming means a reclaimer owns it. A
// process may hold several slots (one per attached module); process views sum every slot
// carrying its pid.
inline constexpr int32_t sim_slot_reclaiming = -1;

struct sim_slot {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> attachments;
  std::atomic<uint64_t> used;    // physical bytes created through this slot
  std::atomic<uint64_t> budget;  // process-mode budget; 0 = capacity
  // /proc/<pid>/stat field 22 of the owner, written right after the pid is claimed (0 until
  // then). A process killed outright never closes its slot; the start time is what lets another
  // process tell "dead" from "pid reused by a stranger" before it reclaims the slot.
  std::atomic<uint64_t> start_time;
  // Host bytes this slot's process registered (host_register) and has not unregistered. A dead
  // process's registrations vanish with it, as the driver's do.
  std::atomic<uint64_t> registered;
};

struct sim_segment {
  // Frozen header: checked by every attach.
  uint64_t magic;
  uint32_t version;
  uint32_t size;  // sizeof(sim_segment) of the creator
  // Configuration, written once by the creator before any other process can see the fd.
  uint64_t capacity;
  uint64_t granularity;
  uint32_t free_mode;
  uint32_t backing_store;
  // Device state.
  std::atomic<uint64_t> used;   // physical bytes of every attached process
  std::atomic<uint64_t> other;  // injected "other process" usage
  std::atomic<int32_t> faults[sim_fault_kinds];  // remaining injected failures per kind
  std::atomic<uint64_t> clock_ns;                // frozen clock value
  std::atomic<uint32_t> clock_frozen;
  uint32_t runtime_version;  // configuration: (major << 16) | minor, never 0
  std::atomic<uint64_t> next_va;  // device-wide VA cursor, so addresses never collide
  std::atomic<uint64_t> creates;
  std::atomic<uint64_t> releases;
  std::atomic<uint64_t> syncs;
  std::atomic<uint64_t> polls;
  std::atomic<uint64_t> maps;
  std::atomic<uint64_t> unmaps;
  std::atomic<uint64_t> host_registrations;
  std::atomic<uint64_t> host_unregistrations;
  sim_slot slots[sim_max_slots];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::is_standard_layout_v<sim_segment>);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && alignof(std::atomic<uint64_t>) == 8);
static_assert(sizeof(sim_slot) == 40);
static_assert(sizeof(sim_segment) == 176 + sim_max_slots * sizeof(sim_slot),
              "the sim segment layout is frozen: bump sim_version when it changes");

// The operations on the segment: creation, validation at attach, process slots and the reclaim
// of dead processes' slots. Both the device vtable (sim_backend.cpp) and the test controls
// (sim_controls.cpp) use them; nothing here touches a process's local bookkeeping.
namespace sim {

// One process's attachment: the mapping, its own fd, its slot and the configuration validated
// and copied at attach. Any attached process can write the shared block, so nothing a call
// depends on for its arithmetic is re-read from it.
struct attachment {
  sim_segment* seg = nullptr;
  int fd = -1;
  uint32_t slot = 0;
  uint64_t capacity = 0;
  uint64_t granularity = 0;
  uint32_t free_mode = 0;
  bool backing_store = false;
  uint32_t runtime_version = 0;
};

// A new device: a sealed memfd holding an initialised block. The caller owns *fd_out.
orch_status create_segment(const orch_sim_config* config, int32_t* fd_out);

// Dups and maps sim_fd, checks the frozen header and the configuration, reclaims dead slots and
// claims one. ORCH_INVALID: not a valid segment; ORCH_OOM_RETRYABLE: every slot is taken.
orch_status attach(int32_t sim_fd, attachment* out);

// Frees the slot, unmaps and closes. The caller has given its physical usage back first.
void detach(attachment& a) noexcept;

// Gives back the slots of processes that died without closing; adds what it freed to *bytes and
// *slots when they are not NULL.
void reclaim_dead_slots(sim_segment* seg, uint64_t* bytes, uint32_t* slots) noexcept;

// Consumes one injected failure of `kind`; true when the call must fail.
bool take_fault(sim_segment* seg, uint32_t kind) noexcept;

int32_t self_pid() noexcept;
// The calling process's views, summed over every slot carrying its pid.
uint64_t process_used(const sim_segment* seg) noexcept;
uint64_t process_budget(const sim_segment* seg, uint64_t capacity) noexcept;

}  // namespace sim
}  // namespace orch::plugin_detail
