// pool_segment: one fixed-size slab of the pinned pool, as one process sees it
// (docs/references.md, anchors §8.2.5: fixed-size slabs with ids instead of in-place
// growth). Layout of the memfd:
//
//   [segment_header | block table: one atomic u64 per granule]  metadata pages
//   [data area: data_size bytes]                                 page aligned
//
// Only the host writes the metadata (allocation is single-writer, §8.3.1). Workers map the
// metadata pages read-only, so a worker bug cannot corrupt allocator state even by accident, and
// map the data area read-write. The data mapping is registered with the process's pin_registrar
// once and unregistered before it is unmapped.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <type_traits>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/memfd_segment.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t segment_magic = 0x5347524fu;  // "ORGS" little-endian
inline constexpr std::uint16_t segment_layout_version = 1;

struct segment_header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;  // sizeof(segment_header)
  std::uint32_t segment_id;
  std::uint32_t reserved;
  std::uint64_t total_size;   // the memfd's sealed size
  std::uint64_t data_offset;  // page aligned
  std::uint64_t data_size;
  std::uint64_t granule;      // power of two, >= 64
  std::uint64_t entry_count;  // data_size / granule
  std::uint64_t padding[3];
};
static_assert(std::is_standard_layout_v<segment_header>);
static_assert(sizeof(segment_header) == 80);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the block table is shared between processes: it needs address-free atomics");

class pool_segment {
 public:
  // Host: creates segment `id` with `data_size` bytes of data (rounded up to the granule) and maps
  // it read-write. Errors: memfd_segment / mapping errors, "invalid_argument", registrar errors.
  static result<pool_segment> create(std::uint32_t id, std::uint64_t data_size,
                                     std::uint64_t granule, pin_registrar& registrar);

  // Worker: adopts a received segment fd, checks that its real size (fstat) is `expected_size`
  // ("size_mismatch"; 0 accepts any size) and its header ("bad_segment"), maps the metadata
  // read-only and the data read-write, and registers the data mapping. On error the fd is closed.
  static result<pool_segment> attach(unique_fd fd, std::uint64_t expected_size,
                                     pin_registrar& registrar);

  pool_segment(pool_segment&& other) noexcept;
  pool_segment& operator=(pool_segment&&) = delete;
  pool_segment(const pool_segment&) = delete;
  ~pool_segment();  // unregisters, then unmaps

  std::uint32_t id() const noexcept { return geometry_.id; }
  const segment_geometry& geometry() const noexcept { return geometry_; }
  std::uint64_t total_size() const noexcept { return file_.size(); }
  // The header and block table as mapped here: read-only in a worker (attach), writable only in
  // the host (create). Exposed for inspection and tests.
  std::span<const std::byte> metadata() const noexcept { return meta_.bytes(); }
  bool metadata_writable() const noexcept { return meta_.writable(); }
  int fd() const noexcept { return file_.fd(); }

  // Errors: descriptor_errc::*.
  status validate(const buffer_descriptor& d) const;
  // Validates, then returns the bytes the descriptor names in this process's mapping.
  result<std::span<std::byte>> bytes(const buffer_descriptor& d) const;

  // Host only (the metadata is read-only elsewhere): publish a new live block, or retire one so
  // every descriptor of it becomes stale.
  void publish_block(std::uint64_t offset, std::uint64_t size, std::uint32_t generation) noexcept;
  void retire_block(std::uint64_t offset) noexcept;

 private:
  pool_segment(memfd_segment file, mapping meta, mapping data, segment_geometry geometry,
               pin_registrar& registrar);
  std::span<std::atomic<std::uint64_t>> entries() const noexcept;

  memfd_segment file_;
  mapping meta_;
  mapping data_;
  segment_geometry geometry_;
  pin_registrar* registrar_;
};

}  // namespace orch::ipc
