// Region handles that can be checked without a lock (the hit path, pager_fast_path.cpp).
//
// A handle is a slot index plus that slot's generation, never a pointer: a handle is looked up
// here and nothing is dereferenced unless its slot still holds exactly that handle, so a handle
// used after region_destroy, device_close or shutdown is refused, and a stale one never names a
// later region that reuses the slot. Publish and unpublish run under the handle registry's
// exclusive lock; lookups run under its shared lock or inside a reader_section.
#pragma once

#include <cstdint>

namespace orch::plugin_detail {

class pager_region;

// Gives `r` a handle (also stored in r). Returns 0 when the table is full.
uint64_t publish_region(pager_region* r) noexcept;
// Makes the handle unreachable (a seq_cst store); free the region only after wait_for_readers().
void unpublish_region(uint64_t handle) noexcept;
// The region the handle names, or nullptr.
pager_region* find_region(uint64_t handle) noexcept;

}  // namespace orch::plugin_detail
