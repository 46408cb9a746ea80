#include "region_table.hpp"

#include <atomic>

#include "pager_device.hpp"

namespace orch::plugin_detail {

namespace region_table_detail {
entry g_table[table_size];
}  // namespace region_table_detail

namespace {

using region_table_detail::entry;
using region_table_detail::g_table;
using region_table_detail::index_bits;
using region_table_detail::table_size;

uint64_t g_cursor = 0;  // next entry to try; under the registry's exclusive lock

}  // namespace

uint64_t publish_region(pager_region* r) noexcept {
  for (uint64_t n = 0; n < table_size; ++n) {
    const uint64_t index = (g_cursor + n) % table_size;
    entry& e = g_table[index];
    if (e.handle.load(std::memory_order_relaxed) != 0) continue;
    g_cursor = index + 1;
    // Generation >= 1 and index + 1 >= 1: a handle is never 0 (NULL).
    const uint64_t handle = (++e.generation << index_bits) | (index + 1);
    r->set_handle(handle);
    e.region.store(r, std::memory_order_relaxed);
    e.handle.store(handle, std::memory_order_release);
    return handle;
  }
  return 0;
}

void unpublish_region(uint64_t handle) noexcept {
  const uint64_t index = (handle & ((uint64_t{1} << index_bits) - 1)) - 1;
  if (index >= table_size) return;
  uint64_t expected = handle;
  g_table[index].handle.compare_exchange_strong(expected, 0);
}

}  // namespace orch::plugin_detail
