// buffer_descriptor: how a pinned-pool buffer is named between processes (docs/shared-memory.md,
// docs/references.md, anchors §8.2.5). It is never a pointer: every receiver resolves it
// against its own mapping of the segment, after checking bounds and generation, so a corrupt or
// stale descriptor is rejected with a typed error instead of being read.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <type_traits>

#include "orch/ipc/errc.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

// Wire and shared-memory form: fixed width, standard layout, 24 bytes.
struct buffer_descriptor {
  std::uint32_t segment = 0;     // pool segment id; 0 is never a valid id
  std::uint32_t generation = 0;  // allocation generation; 0 is never issued
  std::uint64_t offset = 0;      // from the start of the segment's data area
  std::uint64_t size = 0;        // bytes the holder may touch

  friend bool operator==(const buffer_descriptor&, const buffer_descriptor&) = default;
};
static_assert(std::is_standard_layout_v<buffer_descriptor>);
static_assert(sizeof(buffer_descriptor) == 24);

// What a receiver knows of one segment: published by the host in the segment header.
struct segment_geometry {
  std::uint32_t id = 0;
  std::uint64_t data_size = 0;  // bytes in the data area
  std::uint64_t granule = 0;    // allocation unit, a power of two; blocks start on granules
};

// One entry per granule, written by the host only: the generation and length (in granules) of
// the live block that starts there, or 0 where no live block starts.
constexpr std::uint64_t pack_block_entry(std::uint32_t generation,
                                         std::uint32_t granules) noexcept {
  return (static_cast<std::uint64_t>(generation) << 32) | granules;
}
constexpr std::uint32_t entry_generation(std::uint64_t entry) noexcept {
  return static_cast<std::uint32_t>(entry >> 32);
}
constexpr std::uint32_t entry_granules(std::uint64_t entry) noexcept {
  return static_cast<std::uint32_t>(entry & 0xffffffffu);
}

// Checks `d` against one segment: the id matches, the range lies inside the data area (overflow
// safe), it starts on a granule, a live block of generation d.generation starts there, and the
// range does not run past that block. `entries` has one word per granule of the data area.
// Errors: descriptor_errc::*. Pure apart from the acquire loads; the fuzz target drives it.
status validate_descriptor(const buffer_descriptor& d, const segment_geometry& geometry,
                           std::span<const std::atomic<std::uint64_t>> entries);

}  // namespace orch::ipc
