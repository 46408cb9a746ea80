#include "orch/ipc/descriptor.hpp"

#include <string>

namespace orch::ipc {
namespace {

std::string describe(const buffer_descriptor& d) {
  return "descriptor {segment " + std::to_string(d.segment) + ", offset " +
         std::to_string(d.offset) + ", size " + std::to_string(d.size) + ", generation " +
         std::to_string(d.generation) + "}";
}

}  // namespace

status validate_descriptor(const buffer_descriptor& d, const segment_geometry& geometry,
                           std::span<const std::atomic<std::uint64_t>> entries) {
  if (d.size == 0 || d.generation == 0) {
    return error{descriptor_errc::empty, describe(d) + " has no size or no generation"};
  }
  if (d.segment == 0 || d.segment != geometry.id) {
    return error{descriptor_errc::unknown_segment, describe(d) + " names no mapped segment"};
  }
  // Written as two comparisons so offset + size can never wrap.
  if (d.offset >= geometry.data_size || d.size > geometry.data_size - d.offset) {
    return error{descriptor_errc::out_of_bounds, describe(d) + " leaves the segment's " +
                                                     std::to_string(geometry.data_size) +
                                                     " data bytes"};
  }
  if (geometry.granule == 0 || d.offset % geometry.granule != 0) {
    return error{descriptor_errc::misaligned, describe(d) + " does not start on a block"};
  }
  const std::uint64_t index = d.offset / geometry.granule;
  if (index >= entries.size()) {
    return error{descriptor_errc::out_of_bounds, describe(d) + " is past the block table"};
  }
  const std::uint64_t entry = entries[index].load(std::memory_order_acquire);
  if (entry_generation(entry) != d.generation) {
    return error{descriptor_errc::stale_generation,
                 describe(d) + " is stale: the block there has generation " +
                     std::to_string(entry_generation(entry)) + " (0: freed)"};
  }
  const std::uint64_t block_bytes = std::uint64_t{entry_granules(entry)} * geometry.granule;
  if (d.size > block_bytes) {
    return error{descriptor_errc::out_of_bounds, describe(d) + " is larger than its block of " +
                                                     std::to_string(block_bytes) + " bytes"};
  }
  return ok_status();
}

}  // namespace orch::ipc
