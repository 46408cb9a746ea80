#include "orch/ipc/segment_table.hpp"

#include <string>

namespace orch::ipc {

result<std::uint32_t> segment_table::attach(unique_fd fd) {
  auto segment = pool_segment::attach(std::move(fd), *registrar_);
  if (!segment) return segment.err();
  const std::uint32_t id = segment->id();
  if (segments_.count(id) != 0) {
    return error{"duplicate_segment", "segment " + std::to_string(id) + " is already mapped"};
  }
  segments_.emplace(id, std::move(*segment));
  return id;
}

bool segment_table::detach(std::uint32_t id) noexcept {
  return segments_.erase(id) != 0;
}

status segment_table::validate(const buffer_descriptor& d) const {
  auto it = segments_.find(d.segment);
  if (it == segments_.end()) {
    return error{descriptor_errc::unknown_segment,
                 "descriptor names segment " + std::to_string(d.segment) + ", not mapped here"};
  }
  return it->second.validate(d);
}

result<std::span<std::byte>> segment_table::bytes(const buffer_descriptor& d) const {
  auto it = segments_.find(d.segment);
  if (it == segments_.end()) {
    return error{descriptor_errc::unknown_segment,
                 "descriptor names segment " + std::to_string(d.segment) + ", not mapped here"};
  }
  return it->second.bytes(d);
}

}  // namespace orch::ipc
