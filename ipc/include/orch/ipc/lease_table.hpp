// lease_table: the host's reference counts on pinned-pool buffers (docs/shared-memory.md,
// docs/references.md, anchors §8.7). The host is the only owner of every shared block:
//   - allocate() gives the producer the first lease;
//   - acquire() adds a lease for a process the descriptor is handed to;
//   - release() drops one lease; free() is the producer dropping its own, after which the block
//     is in limbo (PyTorch's CudaIPCSentDataLimbo) until the last holder releases;
//   - release_process() drops every lease a dead process held (plasma's DisconnectClient); blocks
//     it had already handed to others stay valid for them.
// A block returns to the pool only when no lease is left, and only then does its generation go
// stale. Processes are named by the host's own ids (e.g. their control slot index).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/pinned_pool.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

using process_id = std::uint32_t;

class lease_table {
 public:
  // `pool` must outlive the table.
  explicit lease_table(pinned_pool& pool) : pool_(&pool) {}

  // Allocates a block with one lease held by `owner`. Errors: pinned_pool::allocate errors.
  result<buffer_descriptor> allocate(process_id owner, std::uint64_t size);
  // One more lease for `holder`, also on a block in limbo (some lease still keeps it alive).
  // Errors: descriptor_errc::* (the block is gone or the descriptor is wrong), "unknown_lease".
  status acquire(const buffer_descriptor& d, process_id holder);
  // Drops one of `holder`'s leases. Errors: descriptor_errc::*, "not_held".
  status release(const buffer_descriptor& d, process_id holder);
  // The producer drops its lease: the block is freed now, or enters limbo while others hold it.
  // Errors: "not_owner", "in_limbo" (freed twice), plus release() errors.
  status free(const buffer_descriptor& d, process_id owner);
  // A process died: drops all its leases. Returns how many leases were dropped.
  std::size_t release_process(process_id dead) noexcept;

  std::size_t live_blocks() const noexcept { return blocks_.size(); }
  std::size_t limbo_blocks() const noexcept;
  std::uint64_t limbo_bytes() const noexcept;
  // Leases `holder` has on the block, 0 when none or unknown.
  std::uint32_t leases(const buffer_descriptor& d, process_id holder) const noexcept;
  // The size of the live block `d` names (as allocated, not as `d` claims it) when `holder`
  // holds a lease on it; 0 when it does not, or the block is gone. What a tensor handed over
  // may reach (tensor_extent.hpp).
  std::uint64_t leased_size(const buffer_descriptor& d, process_id holder) const noexcept;

 private:
  using key = std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>;  // segment, offset, gen
  struct block {
    buffer_descriptor descriptor;
    process_id owner;
    bool in_limbo = false;  // the owner freed it, or died
    std::map<process_id, std::uint32_t> holders;
  };
  static key key_of(const buffer_descriptor& d) noexcept {
    return {d.segment, d.offset, d.generation};
  }
  result<block*> find(const buffer_descriptor& d);
  void drop(std::map<key, block>::iterator it, process_id holder) noexcept;

  pinned_pool* pool_;
  std::map<key, block> blocks_;
};

}  // namespace orch::ipc
