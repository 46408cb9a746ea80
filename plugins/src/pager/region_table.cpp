#include "region_table.hpp"

#include <atomic>

#include "pager_device.hpp"

namespace orch::plugin_detail {

namespace {

// ComfyUI keeps one region per model and device; a process past this many live regions gets
// ORCH_OOM_RETRYABLE from region_create.
constexpr uint64_t table_size = 1u << 14;
constexpr unsigned index_bits = 16;

struct entry {
  std::atomic<uint64_t> handle{0};  // the live handle, 0 when free
  std::atomic<pager_region*> region{nullptr};
  uint64_t generation = 0;  // under the registry's exclusive lock
};

// Static, so never freed while the plugin is loaded: a lookup can always read its entry.
entry g_table[table_size];
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

pager_region* find_region(uint64_t handle) noexcept {
  const uint64_t index = (handle & ((uint64_t{1} << index_bits) - 1)) - 1;
  if (index >= table_size) return nullptr;
  const entry& e = g_table[index];
  // seq_cst: a reader_section without membarrier relies on it (reader_grace.hpp).
  if (e.handle.load() != handle) return nullptr;
  return e.region.load(std::memory_order_acquire);
}

}  // namespace orch::plugin_detail
