// Region handles that can be checked without a lock (the hit path, pager_fast_path.cpp).
//
// A handle is a slot index plus that slot's generation, never a pointer: a handle is looked up
// here and nothing is dereferenced unless its slot still holds exactly that handle, so a handle
// used after region_destroy, device_close or shutdown is refused, and a stale one never names a
// later region that reuses the slot. Publish and unpublish run under the handle registry's
// exclusive lock; lookups run under its shared lock or inside a reader_section.
#pragma once

#include <atomic>
#include <cstdint>

namespace orch::plugin_detail {

class pager_region;

namespace region_table_detail {
inline constexpr uint64_t table_size = 1u << 14;
inline constexpr unsigned index_bits = 16;
struct entry {
  std::atomic<uint64_t> handle{0};  // the live handle, 0 when free
  std::atomic<pager_region*> region{nullptr};
  uint64_t generation = 0;  // under the registry's exclusive lock
};
extern entry g_table[table_size];
}  // namespace region_table_detail

// Gives `r` a handle (also stored in r). Returns 0 when the table is full.
uint64_t publish_region(pager_region* r) noexcept;
// Makes the handle unreachable (a seq_cst store); free the region only after wait_for_readers().
void unpublish_region(uint64_t handle) noexcept;
// The region the handle names, or nullptr. Inline: the hit path looks up twice per fault+unpin.
inline pager_region* find_region(uint64_t handle) noexcept {
  using namespace region_table_detail;
  const uint64_t index = (handle & ((uint64_t{1} << index_bits) - 1)) - 1;
  if (index >= table_size) return nullptr;
  const entry& e = g_table[index];
  // seq_cst: a reader_section without membarrier relies on it (reader_grace.hpp).
  if (e.handle.load() != handle) return nullptr;
  return e.region.load(std::memory_order_acquire);
}

}  // namespace orch::plugin_detail
