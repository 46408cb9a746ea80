// Fuzzes validate_descriptor against a fuzzed segment geometry and block table: whatever it
// accepts must lie inside the data area, start on a block of the same generation and not run
// past that block. Those are the promises every receiver relies on before touching bytes.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "orch/ipc/descriptor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace orch::ipc;
  constexpr std::size_t fixed = sizeof(buffer_descriptor) + 4 + 1 + 4;
  if (size < fixed) return 0;
  buffer_descriptor d;
  std::memcpy(&d, data, sizeof(d));
  std::uint32_t id = 0, entry_count = 0;
  std::memcpy(&id, data + sizeof(d), 4);
  const std::uint64_t granule = std::uint64_t{1} << (6 + data[sizeof(d) + 4] % 20);
  std::memcpy(&entry_count, data + sizeof(d) + 5, 4);
  entry_count %= 4096;
  const segment_geometry geometry{id, std::uint64_t{entry_count} * granule, granule};
  // The remaining bytes fill the block table, 8 per entry; missing entries stay 0 (free).
  std::vector<std::atomic<std::uint64_t>> entries(entry_count);
  const std::uint8_t* rest = data + fixed;
  const std::size_t rest_size = size - fixed;
  for (std::size_t i = 0; i < entry_count && (i + 1) * 8 <= rest_size; ++i) {
    std::uint64_t word = 0;
    std::memcpy(&word, rest + i * 8, 8);
    entries[i].store(word);
  }
  if (!validate_descriptor(d, geometry, entries).ok()) return 0;
  if (d.size == 0 || d.generation == 0 || d.segment != id) __builtin_trap();
  if (d.offset >= geometry.data_size || d.size > geometry.data_size - d.offset) __builtin_trap();
  if (d.offset % granule != 0) __builtin_trap();
  const std::uint64_t entry = entries[d.offset / granule].load();
  if (entry_generation(entry) != d.generation) __builtin_trap();
  if (d.size > std::uint64_t{entry_granules(entry)} * granule) __builtin_trap();
  return 0;
}
