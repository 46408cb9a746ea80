// Pager eviction (docs/references.md, aimdo §4.3, §4.4): freeing a page, lowering watermarks from
// the lowest-priority region up, the deficit-driven walk, and the evict/reclaim and watermark
// entry points. Faults, regions and the budget terms are in pager_device.cpp.
#include <algorithm>
#include <optional>

#include "pager_device.hpp"
#include "reader_grace.hpp"

namespace orch::plugin_detail {

// hit_pins.hpp: the mark goes up before the fence, and the fence comes before any watermark store
// or claim of this lowering. The mark stays up until the mutex is released (device_lock), so one
// fence per region covers a whole eviction walk.
void pager_device::begin_lowering_locked(pager_region& r) noexcept {
  if (r.lowering_.load(std::memory_order_relaxed) != 0) return;
  r.lowering_.store(1);
  lowering_any_ = true;
  if (readers_fenced_by_writer()) fence_readers();
}

void pager_device::end_lowering_locked() noexcept {
  if (!lowering_any_) return;
  lowering_any_ = false;
  // release: a hit path that reads 0 sees every watermark store and claim of the lowering.
  for (pager_region* r : priority_) r->lowering_.store(0, std::memory_order_release);
}

uint64_t pager_device::claim_locked(page_slot& p) noexcept {
  return hit_pin_held(&p) ? 0 : claim_unpinned(p);
}

bool pager_device::pinned(const page_slot& p, const hit_pin_snapshot& records) noexcept {
  return page_word::pins(p.word.load(std::memory_order_relaxed)) != 0 || records.held(&p);
}

// `old` is the word the page had when it was claimed (its word is now 0).
void pager_device::free_page_locked(pager_region& r, uint64_t index, uint64_t old,
                                    uint32_t reason) noexcept {
  page_slot& p = r.pages_[index];
  const uint64_t size = options_.page_size;
  // After a failed synchronisation (only a region's destruction gets here then) the page is left
  // mapped: the device may still read it, and a dead device's memory goes with its context.
  if (!sync_failed_ && (backend_->unmap(device_, r.base_ + index * size, size) != ORCH_OK ||
                        backend_->phys_release(device_, p.handle) != ORCH_OK)) {
    if (host_ != nullptr)
      host_->log(ORCH_LOG_ERROR, "device %d: releasing page %llu failed; page dropped",
                 options_.ordinal, static_cast<unsigned long long>(index));
  }
  p.handle = 0;
  stats_.hits += page_word::hits(old);
  stats_.faults += page_word::faults(old);
  --r.resident_;
  page_bytes_ -= size;
  publish_gate_locked();
  ++stats_.evictions;
  if (host_ != nullptr) host_->report_release(reason, options_.ordinal, size);
}

bool pager_device::sync_locked() noexcept {
  if (sync_failed_) return false;
  const orch_status st = backend_->synchronize(device_);
  if (st == ORCH_OK) return true;
  sync_failed_ = true;
  ++stats_.errors;
  if (host_ != nullptr)
    host_->log(ORCH_LOG_ERROR,
               "device %d: synchronize failed (status %d): no page is freed while the device may "
               "still read it, and this pager refuses every further miss and eviction; restart "
               "the worker",
               options_.ordinal, static_cast<int>(st));
  return false;
}

// Lowers r's watermark by one page. The watermark drops across absent and pinned pages; only a
// resident, unpinned page is freed (§4.4). A pinned page is freed at unpin.
// The watermark is stored before the page is claimed: an unpin that drops the last pin after
// the claim saw it pinned then reads the lowered watermark and frees the page itself.
bool pager_device::lower_one_locked(pager_region& r, bool& synced) noexcept {
  begin_lowering_locked(r);
  const uint64_t index = r.watermark_.load(std::memory_order_relaxed) - 1;
  r.watermark_.store(index);
  const uint64_t old = claim_locked(r.pages_[index]);
  if (old == 0) return false;
  if (!synced) {
    // The device must be done with a page before it is freed (§4.8). When it cannot say so the
    // page stays, resident and mapped, and the watermark goes back above it.
    if (!sync_locked()) {
      r.pages_[index].word.store(old);
      r.watermark_.store(index + 1);
      return false;
    }
    synced = true;
  }
  free_page_locked(r, index, old, ORCH_RELEASE_EVICT);
  return true;
}

// vbars_free (§4.4): ceil(bytes / page) pages, lowest-priority region first, each from its top
// down to its limit. Double sync: before the first free and once at the end. Returns pages freed.
uint64_t pager_device::free_pages_locked(int64_t bytes) noexcept {
  if (bytes <= 0) return 0;
  const uint64_t need = ceil_div(static_cast<uint64_t>(bytes), options_.page_size);
  uint64_t freed = 0;
  bool synced = false;
  for (auto it = priority_.rbegin(); it != priority_.rend() && freed < need; ++it) {
    pager_region& r = **it;
    while (!sync_failed_ && freed < need &&
           r.watermark_.load(std::memory_order_relaxed) > r.limit_)
      if (lower_one_locked(r, synced)) ++freed;
  }
  if (synced) sync_locked();
  return freed;
}

// One watermark step on the lowest-priority region that can still move.
bool pager_device::evict_step_locked(bool& synced, bool& freed) noexcept {
  if (sync_failed_) return false;
  for (auto it = priority_.rbegin(); it != priority_.rend(); ++it) {
    pager_region& r = **it;
    if (r.watermark_.load(std::memory_order_relaxed) > r.limit_) {
      freed = lower_one_locked(r, synced);
      return true;
    }
  }
  return false;
}

// The miss-allocation check (vbars_free_for_vbar, §4.2): before mapping the first missing page,
// walk this region's absent pages from page 0 up to page_end, spending one page of simple-budget
// surplus per absent page, and evict (lowest priority first) while the walk cannot pay. The walk
// stops at the region's own watermark: pages above it will never be mapped, so evicting further
// for them would only throw resident weights away ("rationalize the entire vbar allocation").
//
// The surplus subtracts the missing pages of this fault and then charges them again while the
// cursor moves, so the steady state sits one faulting weight below the simple budget. We keep that
// conservatism on purpose (docs/plugin-abi.md "Conservatism"): it is what ComfyUI's behaviour was
// tuned against, and the conformance suite pins it (aimdo §5.3 table).
void pager_device::rationalise_locked(pager_region& r, uint64_t first_missing,
                                      uint64_t page_end) noexcept {
  const int64_t page = static_cast<int64_t>(options_.page_size);
  int64_t surplus = capacity_locked() -
                    (usage_locked() + static_cast<int64_t>(page_end - first_missing) * page +
                     static_cast<int64_t>(simple_headroom().load()));
  uint64_t cursor = 0;
  bool synced = false;
  for (;;) {
    while (cursor < page_end && cursor < r.watermark_.load(std::memory_order_relaxed)) {
      if ((r.pages_[cursor].word.load(std::memory_order_relaxed) & page_word::resident) != 0) {
        ++cursor;
        continue;
      }
      if (surplus < page) break;
      surplus -= page;
      ++cursor;
    }
    if (cursor >= page_end && surplus >= 0) break;
    if (r.watermark_.load(std::memory_order_relaxed) <= cursor) break;
    bool freed = false;
    if (!evict_step_locked(synced, freed)) break;
    if (freed) surplus += page;
  }
  if (synced) sync_locked();
}

orch_status pager_device::oom_locked() noexcept {
  ++stats_.oom_returns;
  return ORCH_OOM_RETRYABLE;
}

// ---- regions ----------------------------------------------------------------------------------

void pager_device::release_above_watermark_locked(pager_region& r, uint64_t first,
                                                  uint64_t end) noexcept {
  const uint64_t watermark = r.watermark_.load(std::memory_order_relaxed);
  bool synced = false;
  for (uint64_t i = std::max(first, watermark); i < end; ++i) {
    const uint64_t old = claim_locked(r.pages_[i]);
    if (old == 0) continue;
    if (!synced) {
      if (!sync_locked()) {  // as lower_one_locked: the page stays
        r.pages_[i].word.store(old);
        return;
      }
      synced = true;
    }
    free_page_locked(r, i, old, ORCH_RELEASE_UNPIN);
  }
  if (synced) sync_locked();
}

orch_status pager_device::release_above_watermark(pager_region* r, uint64_t offset,
                                                  uint64_t size) {
  if (size == 0 || offset + size < offset) return ORCH_INVALID;
  device_lock lock(*this);
  const uint64_t first = offset / options_.page_size;
  release_above_watermark_locked(
      *r, first, std::min(ceil_div(offset + size, options_.page_size), r->nr_pages_));
  return sync_status_locked();
}

// ---- watermark family (§4.5) ------------------------------------------------------------------

orch_status pager_device::set_watermark(pager_region* r, uint64_t bytes) {
  device_lock lock(*this);
  const uint64_t target = std::min(ceil_div(bytes, options_.page_size), r->nr_pages_);
  if (target >= r->watermark_.load(std::memory_order_relaxed)) {
    r->watermark_.store(target);
    return ORCH_OK;
  }
  bool synced = false;
  while (!sync_failed_ && r->watermark_.load(std::memory_order_relaxed) > target)
    lower_one_locked(*r, synced);  // syncs only before (§4.8)
  return sync_status_locked();
}

orch_status pager_device::set_watermark_limit(pager_region* r, uint64_t bytes) {
  device_lock lock(*this);
  r->limit_ = std::min(ceil_div(bytes, options_.page_size), r->nr_pages_);
  return ORCH_OK;
}

orch_status pager_device::reset_watermark_limits() {
  device_lock lock(*this);
  for (pager_region* r : priority_) r->limit_ = 0;
  return ORCH_OK;
}

orch_status pager_device::evict(pager_region* r, uint64_t bytes, uint64_t* freed) {
  device_lock lock(*this);
  const uint64_t need = ceil_div(bytes, options_.page_size);
  uint64_t pages = 0;
  bool synced = false;
  while (!sync_failed_ && pages < need && r->watermark_ > r->limit_)
    if (lower_one_locked(*r, synced)) ++pages;
  if (synced) sync_locked();
  if (freed != nullptr) *freed = pages * options_.page_size;
  return sync_status_locked();
}

orch_status pager_device::reclaim(uint64_t bytes, uint32_t flags, uint64_t* freed) {
  std::optional<device_lock> lock;
  if ((flags & ORCH_RECLAIM_TRY_LOCK) != 0) {
    lock.emplace(*this, std::try_to_lock);
    if (!lock->owns_lock()) {
      if (freed != nullptr) *freed = 0;
      return ORCH_BUSY;  // "not now": the model thread holds the pager; freeing would not help
    }
  } else {
    lock.emplace(*this);
  }
  ++stats_.reclaims;
  const int64_t target =
      (flags & ORCH_RECLAIM_DEFICIT) != 0 ? deficit_locked(bytes) : signed_request(bytes);
  const uint64_t pages = free_pages_locked(target);
  if (freed != nullptr) *freed = pages * options_.page_size;
  return sync_status_locked();
}

// ---- queries ----------------------------------------------------------------------------------

}  // namespace orch::plugin_detail
