// One process's open sim device (docs/sim-device.md): its attachment to the
// shared segment plus the bookkeeping that stays process-local. Shared by the device vtable
// (sim_backend.cpp) and the test controls (sim_controls.cpp).
//
// Physical handles, VA mappings and host registrations live here, not in the segment: they need
// maps, which shared memory cannot hold safely, and a process's handles die with it anyway.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "sim_segment.hpp"

struct orch_device : orch::plugin_detail::sim::attachment {
  std::mutex mutex;  // process-local bookkeeping below
  struct phys {
    uint64_t size;
    unsigned char* backing;  // NULL without a backing store
    uint32_t mappings;       // a mapped handle cannot be released (as on CUDA)
  };
  struct mapping {
    uint64_t size;
    uint64_t handle;
  };
  std::map<uint64_t, phys> handles;
  std::map<uint64_t, mapping> maps;  // by va
  std::map<const void*, uint64_t> registered;  // host ranges by start (host_register)
  uint64_t next_handle = 1;
};
