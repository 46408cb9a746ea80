#include "orch/ipc/control_segment.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <new>

#include "saturating.hpp"

namespace orch::ipc {
namespace {

constexpr std::uint32_t max_slots = 4096;

// Bytes of the read-write part: counters, slots, blocks.
std::uint64_t shared_bytes(std::uint32_t slots) {
  return sizeof(control_counters) +
         std::uint64_t{slots} * (sizeof(budget_slot) + sizeof(control_block));
}

}  // namespace

control_segment::control_segment(memfd_segment file, mapping header, mapping shared,
                                 std::uint32_t slot_count, std::uint64_t budget) noexcept
    : file_(std::move(file)),
      header_(std::move(header)),
      shared_(std::move(shared)),
      slot_count_(slot_count),
      budget_(budget),
      total_size_(file_.size()) {}

result<control_segment> control_segment::create(std::uint64_t budget_bytes,
                                                std::uint32_t slot_count) {
  if (slot_count == 0 || slot_count > max_slots) {
    return error{"invalid_argument", "a control segment needs between 1 and 4096 slots"};
  }
  // The header gets a page of its own so that workers can map it read-only.
  const std::uint64_t shared_offset = page_size();
  const std::uint64_t size = shared_offset + round_up(shared_bytes(slot_count), page_size());
  auto file = memfd_segment::create("orch-control", size);
  if (!file) return file.err();
  auto header_map = mapping::map(file->fd(), 0, shared_offset, /*writable=*/true);
  if (!header_map) return header_map.err();
  auto shared_map =
      mapping::map(file->fd(), shared_offset, size - shared_offset, /*writable=*/true);
  if (!shared_map) return shared_map.err();
  // The memfd starts zeroed: every slot is free and every counter is 0. Only the fixed fields
  // and the control block headers need writing.
  auto* header = new (header_map->data()) control_header{};
  header->magic = control_segment_magic;
  header->version = control_segment_version;
  header->header_size = sizeof(control_header);
  header->slot_count = slot_count;
  header->slot_size = sizeof(budget_slot);
  header->block_size = sizeof(control_block);
  header->counters_size = sizeof(control_counters);
  header->total_size = size;
  header->shared_offset = shared_offset;
  header->budget_bytes = budget_bytes;
  new (shared_map->data()) control_counters{};
  control_segment segment(std::move(*file), std::move(*header_map), std::move(*shared_map),
                          slot_count, budget_bytes);
  for (std::uint32_t i = 0; i < slot_count; ++i) {
    new (&segment.slot(i)) budget_slot{};
    initialise_control_block(*new (&segment.block(i)) control_block{});
  }
  return segment;
}

result<control_segment> control_segment::attach(unique_fd fd) {
  auto file = memfd_segment::adopt(std::move(fd), 0);
  if (!file) return file.err();
  const std::uint64_t shared_offset = page_size();
  if (file->size() <= shared_offset) {
    return error{"bad_segment", "control segment is too small for its header page"};
  }
  auto header_map = mapping::map(file->fd(), 0, shared_offset, /*writable=*/false);
  if (!header_map) return header_map.err();
  // One copy, validated against the fd's real (sealed) size; the object keeps what it needs
  // from this copy and never looks at the shared header again.
  const control_header h = *reinterpret_cast<const control_header*>(header_map->data());
  if (h.magic != control_segment_magic || h.version != control_segment_version ||
      h.header_size != sizeof(control_header) || h.slot_size != sizeof(budget_slot) ||
      h.block_size != sizeof(control_block) || h.counters_size != sizeof(control_counters) ||
      h.total_size != file->size() || h.shared_offset != shared_offset || h.slot_count == 0 ||
      h.slot_count > max_slots || shared_offset + shared_bytes(h.slot_count) > file->size()) {
    return error{"bad_segment", "control segment failed validation (magic, version or sizes)"};
  }
  auto shared_map =
      mapping::map(file->fd(), shared_offset, file->size() - shared_offset, /*writable=*/true);
  if (!shared_map) return shared_map.err();
  return control_segment(std::move(*file), std::move(*header_map), std::move(*shared_map),
                         h.slot_count, h.budget_bytes);
}

budget_slot& control_segment::slot(std::uint32_t index) const noexcept {
  assert(index < slot_count_);
  auto* first = reinterpret_cast<budget_slot*>(shared_.data() + sizeof(control_counters));
  return first[index];
}

control_block& control_segment::block(std::uint32_t index) const noexcept {
  assert(index < slot_count_);
  auto* first = reinterpret_cast<control_block*>(shared_.data() + sizeof(control_counters) +
                                                 std::uint64_t{slot_count_} * sizeof(budget_slot));
  return first[index];
}

result<std::uint32_t> control_segment::claim_slot(const process_identity& owner) {
  for (std::uint32_t i = 0; i < slot_count(); ++i) {
    budget_slot& s = slot(i);
    if (s.pid.load(std::memory_order_acquire) != 0) continue;
    s.reserved.store(0, std::memory_order_relaxed);
    s.high_water.store(0, std::memory_order_relaxed);
    s.pending.store(0, std::memory_order_relaxed);
    s.start_time.store(owner.start_time, std::memory_order_relaxed);
    s.pid.store(owner.pid, std::memory_order_release);
    initialise_control_block(block(i));
    return i;
  }
  return error{"no_free_slot", "all " + std::to_string(slot_count()) +
                                   " control slots are taken; raise the slot count"};
}

std::uint64_t control_segment::reclaim_slot(std::uint32_t index) noexcept {
  budget_slot& s = slot(index);
  // `reserved` was last written by the (dead) owner, so it is a claim, not a fact: a buggy or
  // hostile worker can write anything there. Subtracting it unchecked would wrap the total to
  // ~2^64 and refuse every later reservation. The most it can honestly hold is what the total
  // has beyond the other owned slots' counters; the host returns no more than that, and never
  // lets the total go below 0.
  std::uint64_t others = 0;
  for (std::uint32_t j = 0; j < slot_count(); ++j) {
    const budget_slot& other = slot(j);
    if (j == index || other.pid.load(std::memory_order_acquire) == 0) continue;
    others = detail::saturating_add(others, other.reserved.load(std::memory_order_acquire));
  }
  const std::uint64_t claimed = s.reserved.exchange(0, std::memory_order_acq_rel);
  const std::uint64_t pending = s.pending.exchange(0, std::memory_order_acq_rel);
  std::atomic<std::uint64_t>& total = counters().total_reserved;
  std::uint64_t current = total.load(std::memory_order_acquire);
  std::uint64_t returned = 0;
  do {
    returned = std::min(claimed, detail::floored_sub(current, others));
  } while (!total.compare_exchange_weak(current, current - returned, std::memory_order_acq_rel,
                                        std::memory_order_acquire));
  if (returned != claimed) {
    overclaimed_bytes_ = detail::saturating_add(overclaimed_bytes_, claimed - returned);
    spdlog::error(
        "budget: slot {} (pid {}) claimed {} reserved bytes, but the total held only {} "
        "beyond the other slots; returned those and ignored the excess of {}",
        index, s.pid.load(std::memory_order_relaxed), claimed, returned, claimed - returned);
  }
  if (pending != 0) {
    counters().unresolved_bytes.fetch_add(pending, std::memory_order_acq_rel);
    spdlog::warn(
        "budget: slot {} (pid {}) died inside a reservation of {} bytes; they stay "
        "counted against the budget",
        index, s.pid.load(std::memory_order_relaxed), pending);
  }
  s.high_water.store(0, std::memory_order_relaxed);
  s.start_time.store(0, std::memory_order_relaxed);
  s.pid.store(0, std::memory_order_release);
  return returned;
}

std::vector<std::uint32_t> control_segment::reclaim_dead() {
  std::vector<std::uint32_t> reclaimed;
  for (std::uint32_t i = 0; i < slot_count(); ++i) {
    budget_slot& s = slot(i);
    const process_identity id{s.pid.load(std::memory_order_acquire),
                              s.start_time.load(std::memory_order_acquire)};
    if (id.pid == 0 || is_alive(id)) continue;
    const std::uint64_t bytes = reclaim_slot(i);
    spdlog::info("budget: reclaimed slot {} of dead pid {}: {} bytes", i, id.pid, bytes);
    reclaimed.push_back(i);
  }
  return reclaimed;
}

budget_account::budget_account(const control_segment& segment, std::uint32_t slot) noexcept
    : total_(&segment.counters().total_reserved),
      slot_(&segment.slot(slot)),
      budget_(segment.budget()) {
  assert(slot < segment.slot_count());
}

status budget_account::reserve(std::uint64_t bytes) {
  if (bytes == 0) return ok_status();
  // pending is added to, not stored, so several threads of one process can reserve at once.
  slot_->pending.fetch_add(bytes, std::memory_order_seq_cst);
  std::uint64_t current = total_->load(std::memory_order_acquire);
  do {
    if (bytes > budget_ || current > budget_ - bytes) {
      slot_->pending.fetch_sub(bytes, std::memory_order_release);
      return error{"budget_exceeded", "reserving " + std::to_string(bytes) +
                                          " pinned bytes would pass the budget of " +
                                          std::to_string(budget_) + " (" + std::to_string(current) +
                                          " reserved by all processes)"};
    }
  } while (!total_->compare_exchange_weak(current, current + bytes, std::memory_order_acq_rel,
                                          std::memory_order_acquire));
  const std::uint64_t now = slot_->reserved.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
  slot_->pending.fetch_sub(bytes, std::memory_order_release);
  std::uint64_t high = slot_->high_water.load(std::memory_order_relaxed);
  while (now > high &&
         !slot_->high_water.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
  }
  return ok_status();
}

void budget_account::release(std::uint64_t bytes) noexcept {
  if (bytes == 0) return;
  // Slot first, then the total: a death in between leaves the total over-counted (safe), and
  // `pending` tells the host so.
  slot_->pending.fetch_add(bytes, std::memory_order_seq_cst);
  slot_->reserved.fetch_sub(bytes, std::memory_order_acq_rel);
  total_->fetch_sub(bytes, std::memory_order_acq_rel);
  slot_->pending.fetch_sub(bytes, std::memory_order_release);
}

}  // namespace orch::ipc
