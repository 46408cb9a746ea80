#include "orch/ipc/pinned_pool.hpp"

#include <bit>
#include <limits>

#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/errc.hpp"

namespace orch::ipc {

pinned_pool::pinned_pool(pool_options options, pin_registrar& registrar, budget_account* budget)
    : options_(options), registrar_(&registrar), budget_(budget) {}

pinned_pool::~pinned_pool() {
  segments_.clear();  // unregister and unmap first, then give the bytes back
  if (budget_ != nullptr) budget_->release(reserved_bytes_);
}

const pool_segment* pinned_pool::find(std::uint32_t id) const noexcept {
  if (id == 0 || id > segments_.size()) return nullptr;
  return segments_[id - 1].segment.get();
}

result<pinned_pool::segment_state*> pinned_pool::add_segment() {
  if (segments_.size() >= options_.max_segments) {
    return error{shm_errc::pool_exhausted, "the pinned pool already has its " +
                                               std::to_string(options_.max_segments) + " segments"};
  }
  const auto id = static_cast<std::uint32_t>(segments_.size() + 1);
  // Reserve a page-rounded upper bound of the memfd first, so a refused budget creates nothing.
  const std::uint64_t data =
      round_up(round_up(options_.segment_data_size, options_.granule), page_size());
  const std::uint64_t estimate =
      round_up(sizeof(segment_header) + data / options_.granule * 8, page_size()) + data;
  if (budget_ != nullptr) {
    if (auto st = budget_->reserve(estimate); !st) return st.err();
  }
  auto segment =
      pool_segment::create(id, options_.segment_data_size, options_.granule, *registrar_);
  if (!segment) {
    if (budget_ != nullptr) budget_->release(estimate);
    return segment.err();
  }
  reserved_bytes_ += estimate;
  segment_state state;
  const std::uint64_t size = segment->geometry().data_size;
  state.segment = std::make_unique<pool_segment>(std::move(*segment));
  state.free.emplace(0, size);
  segments_.push_back(std::move(state));
  return &segments_.back();
}

result<buffer_descriptor> pinned_pool::allocate(std::uint64_t size) {
  if (size == 0) return error{shm_errc::invalid_argument, "cannot allocate 0 bytes"};
  if (options_.granule < 64 || !std::has_single_bit(options_.granule) ||
      options_.segment_data_size == 0) {
    return error{shm_errc::invalid_argument,
                 "pool options need a power-of-two granule >= 64 and a "
                 "non-zero segment size"};
  }
  const std::uint64_t data =
      round_up(round_up(options_.segment_data_size, options_.granule), page_size());
  if (size > data || size / options_.granule >= std::numeric_limits<std::uint32_t>::max()) {
    return error{shm_errc::too_large, "a block of " + std::to_string(size) +
                                          " bytes does not fit a pool segment of " +
                                          std::to_string(data)};
  }
  const std::uint64_t length = round_up(size, options_.granule);
  segment_state* target = nullptr;
  std::map<std::uint64_t, std::uint64_t>::iterator hole;
  for (auto& state : segments_) {
    for (auto it = state.free.begin(); it != state.free.end(); ++it) {
      if (it->second >= length) {
        target = &state;
        hole = it;
        break;
      }
    }
    if (target != nullptr) break;
  }
  if (target == nullptr) {
    auto added = add_segment();
    if (!added) return added.err();
    target = *added;
    hole = target->free.begin();
  }
  const std::uint64_t offset = hole->first;
  const std::uint64_t remaining = hole->second - length;
  target->free.erase(hole);
  if (remaining != 0) target->free.emplace(offset + length, remaining);
  target->live.emplace(offset, length);

  const std::uint32_t generation = next_generation_;
  next_generation_ =
      next_generation_ == std::numeric_limits<std::uint32_t>::max() ? 1 : next_generation_ + 1;
  target->segment->publish_block(offset, length, generation);
  bytes_in_use_ += length;
  return buffer_descriptor{target->segment->id(), generation, offset, size};
}

status pinned_pool::deallocate(const buffer_descriptor& d) {
  if (auto st = validate(d); !st) return st;
  segment_state& state = segments_[d.segment - 1];
  auto live = state.live.find(d.offset);
  const std::uint64_t length = live->second;
  state.live.erase(live);
  state.segment->retire_block(d.offset);
  bytes_in_use_ -= length;
  // Insert the hole and merge it with its neighbours.
  auto it = state.free.emplace(d.offset, length).first;
  if (auto next = std::next(it);
      next != state.free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    state.free.erase(next);
  }
  if (it != state.free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      state.free.erase(it);
    }
  }
  return ok_status();
}

result<const pool_segment*> pinned_pool::resolve(const buffer_descriptor& d) const {
  const pool_segment* segment = find(d.segment);
  if (segment == nullptr) {
    return error{
        descriptor_errc::unknown_segment,
        "descriptor names segment " + std::to_string(d.segment) + ", which the pool lacks"};
  }
  return segment;
}

status pinned_pool::validate(const buffer_descriptor& d) const {
  auto segment = resolve(d);
  if (!segment) return segment.err();
  return (*segment)->validate(d);
}

result<std::span<std::byte>> pinned_pool::bytes(const buffer_descriptor& d) const {
  auto segment = resolve(d);
  if (!segment) return segment.err();
  return (*segment)->bytes(d);
}

}  // namespace orch::ipc
