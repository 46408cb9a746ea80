#include "orch/ipc/lease_table.hpp"
#include "orch/ipc/errc.hpp"

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace orch::ipc {

result<buffer_descriptor> lease_table::allocate(process_id owner, std::uint64_t size) {
  auto d = pool_->allocate(size);
  if (!d) return d.err();
  block b{*d, owner, false, {}};
  b.holders.emplace(owner, 1);
  blocks_.emplace(key_of(*d), std::move(b));
  return *d;
}

result<lease_table::block*> lease_table::find(const buffer_descriptor& d) {
  if (auto st = pool_->validate(d); !st) return st.err();
  auto it = blocks_.find(key_of(d));
  if (it == blocks_.end()) {
    return error{shm_errc::unknown_lease, "the block is live in the pool but has no lease entry"};
  }
  if (d.size > it->second.descriptor.size) {
    return error{descriptor_errc::out_of_bounds, "descriptor is larger than the leased block"};
  }
  return &it->second;
}

status lease_table::acquire(const buffer_descriptor& d, process_id holder) {
  auto b = find(d);
  if (!b) return b.err();
  // A block in limbo may still be passed on by a holder (e.g. an output handed to a second
  // consumer after its producer died): it stays alive as long as any lease exists.
  ++(*b)->holders[holder];
  return ok_status();
}

void lease_table::drop(std::map<key, block>::iterator it, process_id holder) noexcept {
  block& b = it->second;
  auto h = b.holders.find(holder);
  if (--h->second == 0) b.holders.erase(h);
  if (!b.holders.empty()) return;
  const buffer_descriptor d = b.descriptor;
  blocks_.erase(it);
  if (auto st = pool_->deallocate(d); !st) {
    spdlog::error("lease_table: returning a block to the pool failed: {}", st.err().message);
  }
}

status lease_table::release(const buffer_descriptor& d, process_id holder) {
  auto b = find(d);
  if (!b) return b.err();
  if ((*b)->holders.count(holder) == 0) {
    return error{shm_errc::not_held,
                 "process " + std::to_string(holder) + " holds no lease on the block"};
  }
  drop(blocks_.find(key_of(d)), holder);
  return ok_status();
}

status lease_table::free(const buffer_descriptor& d, process_id owner) {
  auto b = find(d);
  if (!b) return b.err();
  if ((*b)->owner != owner) {
    return error{shm_errc::not_owner,
                 "process " + std::to_string(owner) + " did not produce the block"};
  }
  if ((*b)->in_limbo) return error{shm_errc::in_limbo, "the block was freed already"};
  if ((*b)->holders.count(owner) == 0) {
    return error{shm_errc::not_held, "the producer already released its lease"};
  }
  (*b)->in_limbo = true;
  drop(blocks_.find(key_of(d)), owner);
  return ok_status();
}

std::size_t lease_table::release_process(process_id dead) noexcept {
  std::size_t dropped = 0;
  std::vector<key> touched;
  for (auto& [k, b] : blocks_) {
    if (b.owner == dead) b.in_limbo = true;  // nobody can free it any more
    if (b.holders.count(dead) != 0) touched.push_back(k);
  }
  for (const key& k : touched) {
    auto it = blocks_.find(k);
    auto h = it->second.holders.find(dead);
    const std::uint32_t count = h->second;
    dropped += count;
    h->second = 1;
    drop(it, dead);
  }
  return dropped;
}

std::size_t lease_table::limbo_blocks() const noexcept {
  std::size_t n = 0;
  for (const auto& [k, b] : blocks_) n += b.in_limbo ? 1 : 0;
  return n;
}

std::uint64_t lease_table::limbo_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [k, b] : blocks_) n += b.in_limbo ? b.descriptor.size : 0;
  return n;
}

std::uint32_t lease_table::leases(const buffer_descriptor& d, process_id holder) const noexcept {
  auto it = blocks_.find(key_of(d));
  if (it == blocks_.end()) return 0;
  auto h = it->second.holders.find(holder);
  return h == it->second.holders.end() ? 0 : h->second;
}

std::uint64_t lease_table::leased_size(const buffer_descriptor& d,
                                       process_id holder) const noexcept {
  return leases(d, holder) == 0 ? 0 : blocks_.find(key_of(d))->second.descriptor.size;
}

}  // namespace orch::ipc
