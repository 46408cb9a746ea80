// segment_table: the pool segments one receiving process has mapped, by id. A worker attaches
// each segment once (mapping and pin registration are once per process, docs/shared-memory.md) and
// resolves every descriptor it receives here, which validates it before handing out bytes.
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/pool_segment.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

class segment_table {
 public:
  // `registrar` must outlive the table.
  explicit segment_table(pin_registrar& registrar) : registrar_(&registrar) {}

  // Adopts and maps a received segment fd that the host announced (segment_attach) as segment
  // `segment` of `total_size` bytes. The fd is checked against the announcement, not trusted:
  // its real size must be `total_size` ("size_mismatch") and its header must carry `segment`
  // ("segment_mismatch"). Other errors: "duplicate_segment" (this id is mapped already),
  // pool_segment::attach errors. On any error nothing stays mapped or registered and the fd is
  // closed.
  result<std::uint32_t> attach(unique_fd fd, std::uint32_t segment, std::uint64_t total_size);
  // Unregisters and unmaps one segment. Returns false when the id is unknown.
  bool detach(std::uint32_t id) noexcept;

  // Errors: descriptor_errc::*.
  status validate(const buffer_descriptor& d) const;
  result<std::span<std::byte>> bytes(const buffer_descriptor& d) const;

  std::size_t size() const noexcept { return segments_.size(); }
  // The mapped segment with this id, or nullptr.
  const pool_segment* find(std::uint32_t id) const noexcept {
    auto it = segments_.find(id);
    return it == segments_.end() ? nullptr : &it->second;
  }

 private:
  // The segment `d` names. Errors: descriptor_errc::unknown_segment.
  result<const pool_segment*> resolve(const buffer_descriptor& d) const;

  pin_registrar* registrar_;
  std::map<std::uint32_t, pool_segment> segments_;
};

}  // namespace orch::ipc
