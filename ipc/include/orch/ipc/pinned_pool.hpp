// pinned_pool: the host allocator over fixed-size pool segments (docs/shared-memory.md). It is the
// single writer of allocation metadata (docs/references.md, anchors §8.3.1, the plasma
// model): workers never allocate here, they ask the host, so a worker crash cannot corrupt it.
// Each allocation gets a fresh generation, published in the segment's block table, so any
// descriptor of a freed block reads as stale everywhere at once.
//
// The pool's own segments count against the one pinned budget: a segment is reserved
// from the host's budget_account before it is created and returned when the pool goes away.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/pool_segment.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

class budget_account;

struct pool_options {
  std::uint64_t segment_data_size = std::uint64_t{64} << 20;  // per segment
  std::uint64_t granule = 4096;                               // allocation unit and alignment
  std::uint32_t max_segments = 64;
};

class pinned_pool {
 public:
  // `registrar` and `budget` (nullable: no budget) must outlive the pool.
  pinned_pool(pool_options options, pin_registrar& registrar, budget_account* budget = nullptr);
  pinned_pool(const pinned_pool&) = delete;
  pinned_pool& operator=(const pinned_pool&) = delete;
  ~pinned_pool();

  // A new block of at least `size` bytes, first fit, creating a segment when none has room.
  // Errors: "invalid_argument" (size 0), "too_large" (bigger than a segment), "pool_exhausted"
  // (max_segments reached), "budget_exceeded" (from the budget), segment creation errors.
  result<buffer_descriptor> allocate(std::uint64_t size);
  // Returns the block to the free list; every descriptor of it becomes stale.
  // Errors: descriptor_errc::* (the descriptor must be current).
  status deallocate(const buffer_descriptor& d);

  status validate(const buffer_descriptor& d) const;
  result<std::span<std::byte>> bytes(const buffer_descriptor& d) const;

  std::size_t segment_count() const noexcept { return segments_.size(); }
  const pool_segment& segment(std::size_t index) const noexcept {
    return *segments_[index].segment;
  }
  std::uint64_t bytes_in_use() const noexcept { return bytes_in_use_; }
  std::uint64_t reserved_bytes() const noexcept { return reserved_bytes_; }

 private:
  struct segment_state {
    std::unique_ptr<pool_segment> segment;
    std::map<std::uint64_t, std::uint64_t> free;  // offset -> length, coalesced
    std::map<std::uint64_t, std::uint64_t> live;  // offset -> length
  };
  const pool_segment* find(std::uint32_t id) const noexcept;
  // The segment `d` names. Errors: descriptor_errc::unknown_segment.
  result<const pool_segment*> resolve(const buffer_descriptor& d) const;
  result<segment_state*> add_segment();

  pool_options options_;
  pin_registrar* registrar_;
  budget_account* budget_;
  std::vector<segment_state> segments_;
  std::uint32_t next_generation_ = 1;
  std::uint64_t bytes_in_use_ = 0;
  std::uint64_t reserved_bytes_ = 0;
};

}  // namespace orch::ipc
