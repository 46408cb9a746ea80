#include "orch/ipc/segment_table.hpp"
#include "orch/ipc/errc.hpp"

#include <string>

namespace orch::ipc {

result<std::uint32_t> segment_table::attach(unique_fd fd, std::uint32_t segment,
                                            std::uint64_t total_size) {
  // 0 would tell memfd_segment::adopt to accept any size; no real segment is empty.
  if (total_size == 0) {
    return error{shm_errc::size_mismatch,
                 "segment " + std::to_string(segment) + " announced with 0 bytes"};
  }
  if (segments_.count(segment) != 0) {
    return error{shm_errc::duplicate_segment,
                 "segment " + std::to_string(segment) + " is already mapped"};
  }
  auto mapped = pool_segment::attach(std::move(fd), total_size, *registrar_);
  if (!mapped) return mapped.err();
  if (mapped->id() != segment) {
    // `mapped` unregisters and unmaps on the way out, and its fd closes with it.
    return error{shm_errc::segment_mismatch,
                 "received fd holds segment " + std::to_string(mapped->id()) +
                     ", announced as segment " + std::to_string(segment)};
  }
  segments_.emplace(segment, std::move(*mapped));
  return segment;
}

bool segment_table::detach(std::uint32_t id) noexcept {
  return segments_.erase(id) != 0;
}

result<const pool_segment*> segment_table::resolve(const buffer_descriptor& d) const {
  const pool_segment* segment = find(d.segment);
  if (segment == nullptr) {
    return error{descriptor_errc::unknown_segment,
                 "descriptor names segment " + std::to_string(d.segment) + ", not mapped here"};
  }
  return segment;
}

status segment_table::validate(const buffer_descriptor& d) const {
  auto segment = resolve(d);
  if (!segment) return segment.err();
  return (*segment)->validate(d);
}

result<std::span<std::byte>> segment_table::bytes(const buffer_descriptor& d) const {
  auto segment = resolve(d);
  if (!segment) return segment.err();
  return (*segment)->bytes(d);
}

}  // namespace orch::ipc
