#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/errc.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <new>

#include "saturating.hpp"

// Why grants stay safe without a lock (all grant and reserved accesses below are seq_cst, so
// they sit in one total order S):
//
//  - A reservation loads the grant G, CASes `reserved` from r to r+b if r+b <= G, then loads the
//    grant again and undoes itself if r+b passes it.
//  - The host takes grant back by loading `reserved` (r1), storing grant r1, loading `reserved`
//    again (r2) and, if r2 > r1, storing min(old grant, r2).
//
// A reservation whose CAS comes before the host's second load is seen by it (r2 includes it),
// so the final grant covers it. One whose CAS comes after that load has its re-check after the
// host's first store in S, so it sees the lowered grant (or the final one) and undoes itself if
// it no longer fits. Either way no honest slot keeps more than its grant, and the host never
// had to read a total that a worker can write. Between an undo's CAS and its fetch_sub the slot
// may claim more than its current grant, never more than the highest grant it was ever given,
// which is why flagging compares against that ceiling.

namespace orch::ipc {
namespace {

constexpr std::uint32_t max_slots = 4096;

std::uint64_t records_bytes(std::uint32_t slots) {
  return std::uint64_t{slots} * sizeof(slot_record);
}

std::uint64_t slot_memfd_size() {
  return round_up(sizeof(slot_counters) + sizeof(control_block), page_size());
}

void log_seal_refused_once(const error& e) {
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  spdlog::warn(
      "budget: the kernel refused to seal the control segment against later writers ({}); a "
      "worker that re-opens its fd could then write the grants. Linux 5.1 or newer closes this.",
      e.message);
}

}  // namespace

control_segment::control_segment(memfd_segment file, mapping header, mapping records,
                                 std::uint32_t slot_count, std::uint64_t budget) noexcept
    : file_(std::move(file)),
      header_(std::move(header)),
      records_(std::move(records)),
      slot_count_(slot_count),
      budget_(budget),
      total_size_(file_.size()),
      slots_(slot_count),
      views_(slot_count) {}

result<control_segment> control_segment::create(std::uint64_t budget_bytes,
                                                std::uint32_t slot_count) {
  if (slot_count == 0 || slot_count > max_slots) {
    return error{budget_errc::invalid_argument, "a control segment needs between 1 and 4096 slots"};
  }
  const std::uint64_t records_offset = page_size();
  const std::uint64_t size = records_offset + round_up(records_bytes(slot_count), page_size());
  auto file = memfd_segment::create("orch-control", size, /*final_seal=*/false);
  if (!file) return file.err();
  auto header_map = mapping::map(file->fd(), 0, records_offset, /*writable=*/true);
  if (!header_map) return header_map.err();
  auto records_map =
      mapping::map(file->fd(), records_offset, size - records_offset, /*writable=*/true);
  if (!records_map) return records_map.err();
  // The memfd starts zeroed: every slot is free with a grant of 0.
  auto* header = new (header_map->data()) control_header{};
  header->magic = control_segment_magic;
  header->version = control_segment_version;
  header->header_size = sizeof(control_header);
  header->slot_count = slot_count;
  header->record_size = sizeof(slot_record);
  header->block_size = sizeof(control_block);
  header->counters_size = sizeof(slot_counters);
  header->total_size = size;
  header->records_offset = records_offset;
  header->slot_size = slot_memfd_size();
  header->budget_bytes = budget_bytes;
  for (std::uint32_t i = 0; i < slot_count; ++i) {
    new (records_map->data() + std::uint64_t{i} * sizeof(slot_record)) slot_record{};
  }
  // Our two writable mappings exist; from here on nobody maps it writable again.
  if (auto st = file->seal_future_writes(); !st) {
    if (st.err().code != shm_errc::seal_refused) return st.err();
    log_seal_refused_once(st.err());
  }
  return control_segment(std::move(*file), std::move(*header_map), std::move(*records_map),
                         slot_count, budget_bytes);
}

result<control_segment> control_segment::attach(unique_fd control_fd, unique_fd slot_fd,
                                                std::uint32_t slot) {
  auto file = memfd_segment::adopt(std::move(control_fd), 0);
  if (!file) return file.err();
  const std::uint64_t records_offset = page_size();
  if (file->size() <= records_offset) {
    return error{budget_errc::bad_segment, "control segment is too small for its header page"};
  }
  auto header_map = mapping::map(file->fd(), 0, records_offset, /*writable=*/false);
  if (!header_map) return header_map.err();
  // One copy, validated against the fd's real (sealed) size; the object keeps what it needs
  // from this copy and never looks at the shared header again.
  const control_header h = *reinterpret_cast<const control_header*>(header_map->data());
  if (h.magic != control_segment_magic || h.version != control_segment_version ||
      h.header_size != sizeof(control_header) || h.record_size != sizeof(slot_record) ||
      h.block_size != sizeof(control_block) || h.counters_size != sizeof(slot_counters) ||
      h.total_size != file->size() || h.records_offset != records_offset ||
      h.slot_size != slot_memfd_size() || h.slot_count == 0 || h.slot_count > max_slots ||
      records_offset + records_bytes(h.slot_count) > file->size()) {
    return error{budget_errc::bad_segment,
                 "control segment failed validation (magic, version or sizes)"};
  }
  auto records_map =
      mapping::map(file->fd(), records_offset, file->size() - records_offset, /*writable=*/false);
  if (!records_map) return records_map.err();
  control_segment segment(std::move(*file), std::move(*header_map), std::move(*records_map),
                          h.slot_count, h.budget_bytes);
  if (slot >= segment.slot_count() || segment.rec(slot).pid.load(std::memory_order_acquire) !=
                                          static_cast<std::uint64_t>(::getpid())) {
    return error{budget_errc::bad_slot,
                 "control slot " + std::to_string(slot) + " is not recorded for this process"};
  }
  auto own = memfd_segment::adopt(std::move(slot_fd), slot_memfd_size());
  if (!own) return own.err();
  auto own_map = mapping::map(own->fd(), 0, own->size(), /*writable=*/true);
  if (!own_map) return own_map.err();
  // Only the mapping stays: an open fd would let any process of this uid re-open the slot
  // through /proc/<this worker>/fd and write this worker's counters (a sibling worker, too).
  (void)own->release();
  segment.slots_[slot].emplace(owned_slot{unique_fd(), std::move(*own_map)});
  return segment;
}

int control_segment::slot_fd(std::uint32_t index) const noexcept {
  return index < slot_count_ && slots_[index] ? slots_[index]->fd.get() : -1;
}

unique_fd control_segment::take_slot_fd(std::uint32_t index) noexcept {
  if (index >= slot_count_ || !slots_[index]) return unique_fd();
  return std::move(slots_[index]->fd);
}

slot_record& control_segment::rec(std::uint32_t index) const noexcept {
  assert(index < slot_count_);
  return reinterpret_cast<slot_record*>(records_.data())[index];
}

const slot_record& control_segment::record(std::uint32_t index) const noexcept {
  return rec(index);
}

slot_counters& control_segment::counters(std::uint32_t index) const noexcept {
  assert(index < slot_count_ && slots_[index]);
  return *reinterpret_cast<slot_counters*>(slots_[index]->map.data());
}

control_block& control_segment::block(std::uint32_t index) const noexcept {
  assert(index < slot_count_ && slots_[index]);
  return *reinterpret_cast<control_block*>(slots_[index]->map.data() + sizeof(slot_counters));
}

std::uint64_t control_segment::claimed_reserved(std::uint32_t index) const noexcept {
  return slots_[index] ? counters(index).reserved.load(std::memory_order_seq_cst) : 0;
}

std::uint64_t control_segment::grant(std::uint32_t index) const noexcept {
  return rec(index).grant.load(std::memory_order_seq_cst);
}

bool control_segment::flagged(std::uint32_t index) const noexcept {
  return index < slot_count_ && views_[index].flagged;
}

std::uint64_t control_segment::counted_reserved(std::uint32_t index) {
  if (!slots_[index]) return 0;
  const std::uint64_t claimed = claimed_reserved(index);
  const std::uint64_t granted = grant(index);
  if (claimed <= granted) return claimed;
  host_view& v = views_[index];
  if (claimed > v.ceiling && !v.flagged) {
    v.flagged = true;
    spdlog::error(
        "budget: pid {} (slot {}) claims {} pinned bytes, more than it was ever granted ({}); "
        "counted as its grant of {} and flagged: a worker wrote its own slot",
        rec(index).pid.load(std::memory_order_relaxed), index, claimed, v.ceiling, granted);
  }
  return granted;
}

std::uint64_t control_segment::total_reserved() {
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < slot_count_; ++i) {
    if (slots_[i]) total = detail::saturating_add(total, counted_reserved(i));
  }
  return total;
}

void control_segment::set_grant(std::uint32_t index, std::uint64_t value) noexcept {
  const std::uint64_t old = rec(index).grant.load(std::memory_order_seq_cst);
  granted_total_ = granted_total_ - old + value;
  rec(index).grant.store(value, std::memory_order_seq_cst);
  views_[index].ceiling = std::max(views_[index].ceiling, value);
}

status control_segment::approve_total(std::uint64_t total) {
  if (!limit_) return ok_status();
  return limit_(total);
}

void control_segment::tell_total() noexcept {
  if (!limit_) return;
  try {
    (void)limit_(granted_total_);
  } catch (...) {
    // A shrink that could not be told leaves the limit holding more than we use: safe.
  }
}

result<std::uint32_t> control_segment::claim_slot(const process_identity& owner) {
  for (std::uint32_t i = 0; i < slot_count(); ++i) {
    slot_record& r = rec(i);
    if (r.pid.load(std::memory_order_acquire) != 0) continue;
    // A fresh memfd per owner: whatever an earlier owner (or a process that inherited its fd)
    // still writes lands in a file nobody reads any more.
    auto file = memfd_segment::create("orch-slot", slot_memfd_size());
    if (!file) return file.err();
    auto map = mapping::map(file->fd(), 0, file->size(), /*writable=*/true);
    if (!map) return map.err();
    new (map->data()) slot_counters{};
    initialise_control_block(*new (map->data() + sizeof(slot_counters)) control_block{});
    slots_[i].emplace(owned_slot{file->release(), std::move(*map)});
    views_[i] = host_view{};
    set_grant(i, 0);
    r.start_time.store(owner.start_time, std::memory_order_relaxed);
    r.pid.store(owner.pid, std::memory_order_release);
    return i;
  }
  return error{budget_errc::no_free_slot, "all " + std::to_string(slot_count()) +
                                              " control slots are taken; raise the slot count"};
}

std::uint64_t control_segment::reclaim_slot(std::uint32_t index) noexcept {
  slot_record& r = rec(index);
  const std::uint64_t pid = r.pid.load(std::memory_order_acquire);
  if (pid == 0 && !slots_[index]) return 0;
  const std::uint64_t claimed = claimed_reserved(index);
  const std::uint64_t counted = counted_reserved(index);
  if (claimed > counted) {
    overclaimed_bytes_ = detail::saturating_add(overclaimed_bytes_, claimed - counted);
    spdlog::error(
        "budget: slot {} (pid {}) claimed {} reserved bytes with a grant of {}; returned the "
        "grant and ignored the excess of {}",
        index, pid, claimed, counted, claimed - counted);
  }
  set_grant(index, 0);
  tell_total();
  r.start_time.store(0, std::memory_order_relaxed);
  r.pid.store(0, std::memory_order_release);
  slots_[index].reset();
  views_[index] = host_view{};
  return counted;
}

std::vector<std::uint32_t> control_segment::reclaim_dead() {
  std::vector<std::uint32_t> reclaimed;
  for (std::uint32_t i = 0; i < slot_count(); ++i) {
    slot_record& r = rec(i);
    const process_identity id{r.pid.load(std::memory_order_acquire),
                              r.start_time.load(std::memory_order_acquire)};
    if (id.pid == 0 || is_alive(id)) continue;
    const std::uint64_t bytes = reclaim_slot(i);
    spdlog::info("budget: reclaimed slot {} of dead pid {}: {} bytes", i, id.pid, bytes);
    reclaimed.push_back(i);
  }
  return reclaimed;
}

std::uint64_t control_segment::revoke_unused(std::uint32_t index) noexcept {
  if (!slots_[index]) return 0;
  slot_record& r = rec(index);
  std::atomic<std::uint64_t>& reserved = counters(index).reserved;
  const std::uint64_t old = r.grant.load(std::memory_order_seq_cst);
  // A slot that lied about its reservations keeps nothing: its claim says nothing true about
  // what it uses, so it would otherwise hold its grant forever.
  const std::uint64_t first =
      views_[index].flagged ? 0 : reserved.load(std::memory_order_seq_cst);
  if (first >= old) return 0;
  r.grant.store(first, std::memory_order_seq_cst);
  // A reservation that passed its re-check against the old grant is visible now: cover it.
  const std::uint64_t second =
      views_[index].flagged ? 0 : reserved.load(std::memory_order_seq_cst);
  const std::uint64_t kept = second > first ? std::min(old, second) : first;
  if (kept != first) r.grant.store(kept, std::memory_order_seq_cst);
  granted_total_ -= old - kept;
  return old - kept;
}

std::uint64_t control_segment::revoke_others(std::uint32_t except, std::uint64_t wanted) noexcept {
  std::uint64_t taken = 0;
  for (std::uint32_t j = 0; j < slot_count_ && taken < wanted; ++j) {
    if (j != except) taken += revoke_unused(j);
  }
  if (taken > 0) tell_total();
  return taken;
}

result<std::uint64_t> control_segment::grow_grant(std::uint32_t index, std::uint64_t shortfall,
                                                  std::uint64_t slack) {
  if (index >= slot_count_ || !slots_[index]) {
    return error{budget_errc::invalid_argument, "slot " + std::to_string(index) + " is not owned"};
  }
  // Every slow path looks at every slot's claim once, so a liar is flagged (and logged) when
  // anyone needs budget, not only when a table is printed.
  (void)total_reserved();
  const std::uint64_t granted = grant(index);
  if (shortfall == 0) return granted;
  if (views_[index].flagged) {
    return error{
        budget_errc::budget_exceeded,
        "slot " + std::to_string(index) + " claimed more than it was granted; it gets no more"};
  }
  auto free_now = [&] { return detail::floored_sub(budget_, granted_total_); };
  if (shortfall > free_now()) revoke_others(index, shortfall - free_now());
  if (shortfall > free_now()) {
    return error{budget_errc::budget_exceeded,
                 "reserving " + std::to_string(shortfall) +
                     " more pinned bytes would pass the budget of " + std::to_string(budget_) +
                     " (" + std::to_string(granted_total_) + " granted to all processes, " +
                     std::to_string(total_reserved()) + " reserved)"};
  }
  std::uint64_t extra = shortfall + std::min(slack, free_now() - shortfall);
  status approved = approve_total(granted_total_ + extra);
  if (!approved && extra != shortfall) {
    extra = shortfall;
    approved = approve_total(granted_total_ + extra);
  }
  if (!approved && revoke_others(index, UINT64_MAX) > 0) {
    approved = approve_total(granted_total_ + extra);
  }
  if (!approved) return approved.err();
  set_grant(index, granted + extra);
  return granted + extra;
}

budget_account::budget_account(const control_segment& segment, std::uint32_t slot) noexcept
    : grant_(&segment.record(slot).grant),
      counters_(&segment.counters(slot)),
      budget_(segment.budget()) {
  assert(slot < segment.slot_count());
}

bool budget_account::try_reserve(std::uint64_t bytes, std::uint64_t& shortfall) noexcept {
  std::uint64_t held = counters_->reserved.load(std::memory_order_seq_cst);
  while (true) {
    const std::uint64_t granted = grant_->load(std::memory_order_seq_cst);
    if (bytes > granted || held > granted - bytes) {
      shortfall =
          held > granted ? detail::saturating_add(held - granted, bytes) : bytes - (granted - held);
      return false;
    }
    if (!counters_->reserved.compare_exchange_weak(held, held + bytes, std::memory_order_seq_cst,
                                                   std::memory_order_seq_cst)) {
      continue;
    }
    if (held + bytes <= grant_->load(std::memory_order_seq_cst)) break;
    // The host took grant back between our check and our CAS: undo, then look again.
    release(bytes);
    held = counters_->reserved.load(std::memory_order_seq_cst);
  }
  const std::uint64_t now = held + bytes;
  std::uint64_t high = counters_->high_water.load(std::memory_order_relaxed);
  while (now > high &&
         !counters_->high_water.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
  }
  return true;
}

status budget_account::reserve(std::uint64_t bytes) {
  if (bytes == 0) return ok_status();
  std::uint64_t shortfall = 0;
  // A few rounds: between the host's answer and our retry another thread may take the new grant.
  for (int round = 0; round < 4; ++round) {
    if (try_reserve(bytes, shortfall)) return ok_status();
    if (!source_) break;
    if (auto st = source_(shortfall); !st) return st.err();
  }
  return error{budget_errc::budget_exceeded,
               "reserving " + std::to_string(bytes) +
                   " pinned bytes would pass this process's grant of " + std::to_string(grant()) +
                   " (" + std::to_string(reserved()) + " reserved here, budget " +
                   std::to_string(budget_) + ")"};
}

void budget_account::release(std::uint64_t bytes) noexcept {
  if (bytes == 0) return;
  std::uint64_t held = counters_->reserved.load(std::memory_order_seq_cst);
  while (!counters_->reserved.compare_exchange_weak(held, detail::floored_sub(held, bytes),
                                                    std::memory_order_seq_cst,
                                                    std::memory_order_seq_cst)) {
  }
}

}  // namespace orch::ipc
