// The pager policy (docs/references.md, aimdo §4): opening a device, budget terms and poll, mapping
// pages, regions, faults and unpins. Eviction is in pager_eviction.cpp, read-outs in
// pager_queries.cpp, the lock-free hit path in pager_fast_path.cpp.
#include "pager_device.hpp"
#include "reader_grace.hpp"

#include <algorithm>
#include <bit>
#include <new>

#include "region_table.hpp"

namespace orch::plugin_detail {

pager_device::pager_device(const orch_backend_api* backend, orch_device* device,
                           const pager_options& options, uint64_t total,
                           const host_link* host) noexcept
    : backend_(backend), device_(device), options_(options), total_(total), host_(host) {
  stats_.struct_size = sizeof stats_;
  if (host_ != nullptr) host_->clock_source(&host_clock_, &host_clock_ctx_);
  backend_now_ = backend_->now_ns;
  if (const uint64_t page = options_.page_size; page != 0 && (page & (page - 1)) == 0)
    page_shift_ = std::countr_zero(page);
  publish_gate_locked();  // nobody else can see the device yet
}

orch_status pager_device::open(const orch_backend_api* backend, const orch_device_config& config,
                               const pager_options& options, const host_link* host,
                               pager_device** out) {
  orch_device* dev = nullptr;
  if (const orch_status st = backend->device_open(&config, &dev); st != ORCH_OK) return st;
  uint64_t total = 0;
  uint64_t gran = 0;
  orch_status st = backend->device_total_mem(dev, &total);
  if (st == ORCH_OK) st = backend->granularity(dev, &gran);
  if (st == ORCH_OK && (gran == 0 || total == 0)) st = ORCH_DEVICE_ERROR;
  if (st != ORCH_OK) {
    backend->device_close(dev);
    return st;
  }
  pager_options opts = options;
  // Query the granularity instead of assuming aimdo's hard-coded 2 MiB (§6.1).
  opts.page_size = ceil_div(opts.page_size == 0 ? default_page_size : opts.page_size, gran) * gran;
  auto* p = new (std::nothrow) pager_device(backend, dev, opts, total, host);
  if (p == nullptr) {
    backend->device_close(dev);
    return ORCH_HOST_OOM;
  }
  *out = p;
  return ORCH_OK;
}

// The plugin has unpublished every region and waited for the hit path's readers (reader_grace.hpp)
// before it deletes a device.
pager_device::~pager_device() {
  while (!priority_.empty()) destroy_region(priority_.front());
  drop_hit_counters(this);
  backend_->device_close(device_);
}

// ---- accounting -------------------------------------------------------------------------------

int64_t pager_device::capacity_locked() const noexcept {
  const uint64_t cap = options_.budget_cap != 0 ? std::min(total_, options_.budget_cap) : total_;
  return static_cast<int64_t>(cap);
}

int64_t pager_device::usage_locked() const noexcept {
  return static_cast<int64_t>(page_bytes_) + external_bytes_;
}

uint64_t pager_device::now_ns() const noexcept {
  return fast_now_ns();
}

// The hit path's view of the stopgap `free(deficit(0))` (§4.2 step 1). deficit(0) is
// max(simple, polled) + extra with simple = usage + H - capacity, H the process-wide simple
// headroom that may change at any time; so what is published is the largest H for which the
// stopgap frees nothing (INT64_MIN when the polled term alone already asks for a free), and the
// next time a poll is due. Called whenever usage, capacity or the poll state change.
void pager_device::publish_gate_locked() noexcept {
  const int64_t extra = static_cast<int64_t>(options_.extra_headroom);
  const bool polled_term = polled_ && options_.pressure_source != ORCH_PRESSURE_NONE;
  const int64_t polled = deficit_sync_ + (usage_locked() - usage_at_poll_) + extra;
  const int64_t limit = capacity_locked() - usage_locked() - extra;
  fast_headroom_limit_.store(polled_term && polled > 0 ? INT64_MIN : limit,
                             std::memory_order_release);
  // A poll is due once now - last >= interval, as in poll_locked. Without a reading yet every
  // fault tries one (interval 0), as the locked path does; with no pressure source none is.
  uint64_t interval = 0;
  if (options_.pressure_source == ORCH_PRESSURE_NONE)
    interval = UINT64_MAX;
  else if (polled_)
    interval = options_.poll_interval_ns;
  poll_last_ns_.store(last_poll_ns_, std::memory_order_relaxed);
  poll_interval_ns_.store(interval, std::memory_order_relaxed);
}

void pager_device::poll_locked(bool force) noexcept {
  if (options_.pressure_source == ORCH_PRESSURE_NONE) return;
  const uint64_t now = now_ns();
  if (!force && polled_ && now - last_poll_ns_ < options_.poll_interval_ns) return;
  last_poll_ns_ = now;
  uint64_t free_bytes = 0;
  if (backend_->mem_get_info(device_, &free_bytes, nullptr) != ORCH_OK) {
    // Keep the previous reading; without one the budget runs on the simple term alone. (aimdo
    // charges the whole request as deficit instead: docs/design-changes.md.)
    if (!poll_failure_logged_ && host_ != nullptr)
      host_->log(ORCH_LOG_WARN, "device %d: pressure poll failed; using the last reading",
                 options_.ordinal);
    poll_failure_logged_ = true;
    publish_gate_locked();  // the throttle restarted
    return;
  }
  ++stats_.polls;
  polled_ = true;
  last_free_ = free_bytes;
  deficit_sync_ = options_.poll_floor - static_cast<int64_t>(free_bytes);
  usage_at_poll_ = usage_locked();
  publish_gate_locked();
}

// budget_deficit (§4.6): max(simple, polled) + extra. simple is our own accounting against the
// capacity (blind to other processes); polled is driver free memory against a fixed floor, plus
// our own allocations since that poll.
int64_t pager_device::deficit_locked(uint64_t request) noexcept {
  poll_locked(false);
  const int64_t req = signed_request(request);
  int64_t deficit =
      usage_locked() + req + static_cast<int64_t>(simple_headroom().load()) - capacity_locked();
  if (polled_ && options_.pressure_source != ORCH_PRESSURE_NONE)
    deficit = std::max(deficit, deficit_sync_ + (usage_locked() - usage_at_poll_) + req);
  return deficit + static_cast<int64_t>(options_.extra_headroom);
}

// ---- page primitives --------------------------------------------------------------------------

orch_status pager_device::map_page_locked(pager_region& r, uint64_t index) noexcept {
  const uint64_t size = options_.page_size;
  uint64_t handle = 0;
  if (const orch_status st = backend_->phys_create(device_, size, &handle); st != ORCH_OK)
    return st;
  if (const orch_status st = backend_->map(device_, r.base_ + index * size, size, handle);
      st != ORCH_OK) {
    backend_->phys_release(device_, handle);
    return st == ORCH_OOM_RETRYABLE ? st : ORCH_DEVICE_ERROR;
  }
  page_slot& p = r.pages_[index];
  p.handle = handle;
  p.serial = ++next_serial_;  // new physical page: new signature (§4.2)
  // An absent page's word is 0 and nothing but the mutex holder changes it; the release store
  // publishes handle and serial to a hit path that pins the page (acquire).
  p.word.store(page_word::resident, std::memory_order_release);
  ++r.resident_;
  page_bytes_ += size;
  publish_gate_locked();
  return ORCH_OK;
}

void pager_device::fold_counters_locked(page_slot& p) noexcept {
  const uint64_t mask = (page_word::hit_max << page_word::hit_shift) |
                        (page_word::fault_max << page_word::fault_shift);
  uint64_t w = p.word.load();
  while (!p.word.compare_exchange_weak(w, w & ~mask)) {
  }
  stats_.hits += page_word::hits(w);
  stats_.faults += page_word::faults(w);
}

orch_status pager_device::create_region(uint64_t bytes, pager_region** out, uint64_t* clamped) {
  if (out == nullptr || bytes == 0) return ORCH_INVALID;
  device_lock lock(*this);
  const uint64_t page = options_.page_size;
  // Clamp to floor(capacity / page) pages (§2.3 "VBAR size clamp"); report what was granted.
  const uint64_t nr =
      std::min(ceil_div(bytes, page), static_cast<uint64_t>(capacity_locked()) / page);
  if (nr == 0) return ORCH_OOM_RETRYABLE;
  uint64_t va = 0;
  if (const orch_status st = backend_->va_reserve(device_, nr * page, &va); st != ORCH_OK)
    return st == ORCH_OOM_RETRYABLE ? st : ORCH_DEVICE_ERROR;
  auto* r = new (std::nothrow) pager_region;
  if (r == nullptr) {
    backend_->va_free(device_, va, nr * page);
    return ORCH_HOST_OOM;
  }
  r->owner_ = this;
  r->base_ = va;
  r->nr_pages_ = nr;
  r->watermark_.store(nr);
  try {
    r->pages_.reset(new page_slot[nr]);
    priority_.push_front(r);  // the newest region is the most important (§4.4)
  } catch (...) {
    backend_->va_free(device_, va, nr * page);
    delete r;
    throw;
  }
  r->position_ = priority_.begin();
  *out = r;
  if (clamped != nullptr) *clamped = nr * page;
  return ORCH_OK;
}

// As aimdo's vbar_free (§2.1): sync, free every page (pinned ones too), free the VA, sync again.
// Both syncs are skipped when nothing was resident: no device work can refer to the region then.
// The plugin has unpublished the region and waited for the hit path's readers first.
void pager_device::destroy_region(pager_region* r) noexcept {
  if (r == nullptr) return;
  device_lock lock(*this);
  const bool had_pages = r->resident_ > 0;
  if (had_pages) sync_locked();
  // After a failed synchronisation the pages and the address range stay mapped (free_page_locked).
  for (uint64_t i = 0; i < r->nr_pages_; ++i)
    if (const uint64_t old = r->pages_[i].word.exchange(0); (old & page_word::resident) != 0)
      free_page_locked(*r, i, old, ORCH_RELEASE_TARGETED);
  if (!sync_failed_ || !had_pages) backend_->va_free(device_, r->base_, r->nr_pages_ * options_.page_size);
  if (had_pages) sync_locked();
  drop_hit_pins(&r->pages_[0], &r->pages_[0] + r->nr_pages_);
  priority_.erase(r->position_);
  delete r;
}

void pager_device::unpublish_regions() noexcept {
  device_lock lock(*this);
  for (const pager_region* r : priority_) unpublish_region(r->handle());
}

uint64_t pager_device::pinned_pages_locked(const pager_region& r,
                                           const hit_pin_snapshot& records) const noexcept {
  uint64_t pinned = 0;
  for (uint64_t i = 0; i < r.nr_pages_; ++i)
    if (pager_device::pinned(r.pages_[i], records)) ++pinned;
  return pinned;
}

orch_status pager_device::region_info(pager_region* r, orch_region_info* info) {
  if (info == nullptr || !ORCH_HAS_FIELD(info, pinned_pages)) return ORCH_INVALID;
  device_lock lock(*this);
  info->base = r->base_;
  info->page_size = options_.page_size;
  info->nr_pages = r->nr_pages_;
  info->watermark = r->watermark_.load(std::memory_order_relaxed);
  info->watermark_limit = r->limit_;
  info->resident_pages = r->resident_;
  info->pinned_pages = pinned_pages_locked(*r, hit_pin_snapshot{});
  return ORCH_OK;
}

orch_status pager_device::prioritize(pager_region* r, bool to_top) {
  device_lock lock(*this);
  // splice relinks the node: it cannot allocate or throw, and r->position_ stays valid. An
  // erase followed by a push could fail after the erase and leave position_ dangling.
  priority_.splice(to_top ? priority_.begin() : priority_.end(), priority_, r->position_);
  // prioritize is the only way back for evicted pages (§4.4); deprioritize leaves the watermark
  // where eviction put it (§2.1: it only moves the region), as aimdo does.
  if (to_top) r->watermark_.store(r->nr_pages_);
  return ORCH_OK;
}

// ---- fault and unpin (§4.2, §4.3) -------------------------------------------------------------

orch_status pager_device::fault(pager_region* r, uint64_t offset, uint64_t size, uint64_t* sig,
                                size_t sig_cap, size_t* sig_len, uint64_t* newly_mapped) {
  if (size == 0 || offset + size < offset) return ORCH_INVALID;
  const uint64_t page = options_.page_size;
  const uint64_t first = offset / page;
  const uint64_t end = ceil_div(offset + size, page);
  if (sig != nullptr && sig_cap < end - first) return ORCH_INVALID;
  device_lock lock(*this);
  ++stats_.faults;
  if (newly_mapped != nullptr) *newly_mapped = 0;
  if (sync_failed_) return ORCH_DEVICE_ERROR;  // sync_locked: nothing is mapped or freed now
  // A hit path that backed out of an eviction race may have left pages for this (its unpin).
  if (end <= r->nr_pages_) release_above_watermark_locked(*r, first, end);
  // 1. The stopgap: react to a polled spike even when no allocation hook ran.
  free_pages_locked(deficit_locked(0));
  if (sync_failed_) return ORCH_DEVICE_ERROR;
  // 2. The fast path: above the watermark (or past the clamp) nothing is mapped.
  if (end > r->watermark_.load(std::memory_order_relaxed)) return oom_locked();
  const auto above = [&] { return end > r->watermark_.load(std::memory_order_relaxed); };
  for (uint64_t i = first; i < end; ++i)
    if (page_word::pins(r->pages_[i].word.load()) >= page_word::pin_max) return ORCH_INVALID;
  uint64_t mapped = 0;
  bool checked = false;
  for (uint64_t i = first; i < end; ++i) {
    if ((r->pages_[i].word.load(std::memory_order_relaxed) & page_word::resident) != 0) {
      ++stats_.hits;
      continue;
    }
    if (!checked) {
      checked = true;
      rationalise_locked(*r, i, end);
      if (sync_failed_) return ORCH_DEVICE_ERROR;
      if (above()) return oom_locked();
    }
    // A budget-triggered free and, after a driver OOM, a second one before the retry: aimdo
    // counts the budget's free as the retry's and fails with "Fault failed: 2" (ComfyUI #12943)
    // where this maps the page (docs/design-changes.md).
    if (deficit_locked(page) > 0) {
      free_pages_locked(static_cast<int64_t>(page));
      if (sync_failed_) return ORCH_DEVICE_ERROR;
      if (above()) return oom_locked();
    }
    orch_status st = map_page_locked(*r, i);
    if (st == ORCH_OOM_RETRYABLE) {
      free_pages_locked(static_cast<int64_t>(page));
      if (sync_failed_) return ORCH_DEVICE_ERROR;
      if (above()) return oom_locked();
      st = map_page_locked(*r, i);  // one retry, budget not re-checked; any failure is an error
    }
    if (st != ORCH_OK) {
      // Pages mapped earlier in this call stay resident and unpinned (no rollback, §4.2).
      ++stats_.errors;
      if (host_ != nullptr)
        host_->log(ORCH_LOG_ERROR, "device %d: fault failed mapping page %llu", options_.ordinal,
                   static_cast<unsigned long long>(i));
      return ORCH_DEVICE_ERROR;
    }
    ++stats_.misses;
    ++mapped;
  }
  // Only after every page succeeded are the pins taken. A hit path may pin the same words at the
  // same time, hence the atomic add; counters near their limit are folded so it can go on.
  for (uint64_t i = first; i < end; ++i) {
    page_slot& p = r->pages_[i];
    const uint64_t w = p.word.fetch_add(page_word::pin_one);
    if (page_word::hits(w) >= page_word::hit_max / 2 ||
        page_word::faults(w) >= page_word::fault_max / 2)
      fold_counters_locked(p);
  }
  if (sig != nullptr)
    for (uint64_t i = first; i < end; ++i) sig[i - first] = r->pages_[i].serial;
  if (sig_len != nullptr) *sig_len = end - first;
  if (newly_mapped != nullptr) *newly_mapped = mapped;
  return ORCH_OK;
}

orch_status pager_device::unpin(pager_region* r, uint64_t offset, uint64_t size) {
  if (size == 0 || offset + size < offset) return ORCH_INVALID;
  const uint64_t page = options_.page_size;
  device_lock lock(*this);
  const uint64_t first = offset / page;
  const uint64_t end = std::min(ceil_div(offset + size, page), r->nr_pages_);
  const bool above = end > r->watermark_.load(std::memory_order_relaxed);
  // Pages above the watermark are freed as their last pin goes, only after the device is done.
  const bool may_free = !above || sync_locked();
  for (uint64_t i = first; i < end; ++i) {
    page_slot& p = r->pages_[i];
    uint64_t w = p.word.load();
    // No pin in the word: a hit's record may hold the page (an unpin over another range, or on
    // another thread, than the fault's). It becomes word pins, one per page it covers, and this
    // unpin takes one of them. Under the mutex nothing can claim or map a page meanwhile.
    if (page_word::pins(w) == 0 && readers_fenced_by_writer())
      if (const uint64_t record = take_hit_pin_covering(&p); record != 0) {
        auto* held = const_cast<page_slot*>(hit_pin_first(record));
        for (uint64_t k = 0; k < hit_pin_pages(record); ++k)
          held[k].word.fetch_add(page_word::pin_one);
        w = p.word.load();
      }
    // Saturating, as aimdo; a CAS because a hit path may pin or unpin the same word meanwhile.
    while (page_word::pins(w) != 0 && !p.word.compare_exchange_weak(w, w - page_word::pin_one)) {
    }
    if (page_word::pins(w) != 1) continue;
    // Evicted while in use: the watermark already passed it, so it goes now (unless a hit path
    // pinned it again meanwhile: then that pin's unpin frees it).
    if (may_free && i >= r->watermark_.load(std::memory_order_relaxed))
      if (const uint64_t old = claim_locked(p); old != 0)
        free_page_locked(*r, i, old, ORCH_RELEASE_UNPIN);
  }
  if (above) sync_locked();
  return sync_status_locked();
}

}  // namespace orch::plugin_detail
