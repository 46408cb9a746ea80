#include "pager_policy.hpp"

#include <algorithm>
#include <new>

namespace orch::plugin_detail {

std::atomic<uint64_t>& simple_headroom() noexcept {
  static std::atomic<uint64_t> bytes{default_headroom};
  return bytes;
}

namespace {

// ceil(a / b) without forming a + b - 1, which wraps for requests near UINT64_MAX ("evict
// everything" is a natural host request).
uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// A byte request as a signed amount. The deficit arithmetic adds it to usage and headroom, so
// it is clamped far below INT64_MAX: 2^61 bytes is still more than any device holds.
constexpr uint64_t max_signed_request = uint64_t{1} << 61;
int64_t signed_request(uint64_t bytes) {
  return static_cast<int64_t>(std::min(bytes, max_signed_request));
}

}  // namespace

pager_device::pager_device(const orch_backend_api* backend, orch_device* device,
                           const pager_options& options, uint64_t total,
                           const host_link* host) noexcept
    : backend_(backend), device_(device), options_(options), total_(total), host_(host) {
  stats_.struct_size = sizeof stats_;
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
    return ORCH_OOM_RETRYABLE;
  }
  *out = p;
  return ORCH_OK;
}

pager_device::~pager_device() {
  while (!priority_.empty()) destroy_region(priority_.front());
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
  if (backend_->now_ns != nullptr) return backend_->now_ns(device_);
  return host_ != nullptr ? host_->now_ns() : monotonic_ns();
}

void pager_device::poll_locked(bool force) noexcept {
  if (options_.pressure_source == ORCH_PRESSURE_NONE) return;
  const uint64_t now = now_ns();
  if (!force && polled_ && now - last_poll_ns_ < options_.poll_interval_ns) return;
  last_poll_ns_ = now;
  uint64_t free_bytes = 0;
  if (backend_->mem_get_info(device_, &free_bytes, nullptr) != ORCH_OK) {
    // Keep the previous reading; without one the budget runs on the simple term alone.
    if (!poll_failure_logged_ && host_ != nullptr)
      host_->log(ORCH_LOG_WARN, "device %d: pressure poll failed; using the last reading",
                 options_.ordinal);
    poll_failure_logged_ = true;
    return;
  }
  ++stats_.polls;
  polled_ = true;
  last_free_ = free_bytes;
  deficit_sync_ = options_.poll_floor - static_cast<int64_t>(free_bytes);
  usage_at_poll_ = usage_locked();
}

// budget_deficit (§4.6): max(simple, polled) + extra. simple is our own accounting against the
// capacity (blind to other processes); polled is driver free memory against a fixed floor, plus
// our own allocations since that poll.
int64_t pager_device::deficit_locked(uint64_t request) noexcept {
  poll_locked(false);
  const int64_t req = signed_request(request);
  int64_t deficit = usage_locked() + req + static_cast<int64_t>(simple_headroom().load()) -
                    capacity_locked();
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
  p.resident = true;
  p.serial = ++next_serial_;  // new physical page: new signature (§4.2)
  ++r.resident_;
  page_bytes_ += size;
  return ORCH_OK;
}

void pager_device::free_page_locked(pager_region& r, uint64_t index, uint32_t reason) noexcept {
  page_slot& p = r.pages_[index];
  const uint64_t size = options_.page_size;
  if (backend_->unmap(device_, r.base_ + index * size, size) != ORCH_OK ||
      backend_->phys_release(device_, p.handle) != ORCH_OK) {
    if (host_ != nullptr)
      host_->log(ORCH_LOG_ERROR, "device %d: releasing page %llu failed; page dropped",
                 options_.ordinal, static_cast<unsigned long long>(index));
  }
  if (p.pins > 0) --r.pinned_;
  p = page_slot{0, p.serial, 0, false};
  --r.resident_;
  page_bytes_ -= size;
  ++stats_.evictions;
  if (host_ != nullptr) host_->report_release(reason, options_.ordinal, size);
}

void pager_device::sync_locked() noexcept { backend_->synchronize(device_); }

// Lowers r's watermark by one page. The watermark drops across absent and pinned pages; only a
// resident, unpinned page is freed (§4.4). A pinned page is freed at unpin.
bool pager_device::lower_one_locked(pager_region& r, bool& synced) noexcept {
  --r.watermark_;
  const page_slot& p = r.pages_[r.watermark_];
  if (!p.resident || p.pins != 0) return false;
  if (!synced) {
    sync_locked();  // the device must be done with a page before it is freed (§4.8)
    synced = true;
  }
  free_page_locked(r, r.watermark_, ORCH_RELEASE_EVICT);
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
    while (freed < need && r.watermark_ > r.limit_)
      if (lower_one_locked(r, synced)) ++freed;
  }
  if (synced) sync_locked();
  return freed;
}

// One watermark step on the lowest-priority region that can still move.
bool pager_device::evict_step_locked(bool& synced, bool& freed) noexcept {
  for (auto it = priority_.rbegin(); it != priority_.rend(); ++it) {
    pager_region& r = **it;
    if (r.watermark_ > r.limit_) {
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
    while (cursor < page_end && cursor < r.watermark_) {
      if (r.pages_[cursor].resident) {
        ++cursor;
        continue;
      }
      if (surplus < page) break;
      surplus -= page;
      ++cursor;
    }
    if (cursor >= page_end && surplus >= 0) break;
    if (r.watermark_ <= cursor) break;
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

orch_status pager_device::create_region(uint64_t bytes, pager_region** out, uint64_t* clamped) {
  if (out == nullptr || bytes == 0) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  const uint64_t page = options_.page_size;
  // Clamp to floor(capacity / page) pages (§2.3 "VBAR size clamp"); report what was granted.
  const uint64_t nr = std::min(ceil_div(bytes, page), static_cast<uint64_t>(capacity_locked()) / page);
  if (nr == 0) return ORCH_OOM_RETRYABLE;
  uint64_t va = 0;
  if (const orch_status st = backend_->va_reserve(device_, nr * page, &va); st != ORCH_OK)
    return st == ORCH_OOM_RETRYABLE ? st : ORCH_DEVICE_ERROR;
  auto* r = new (std::nothrow) pager_region;
  if (r == nullptr) {
    backend_->va_free(device_, va, nr * page);
    return ORCH_OOM_RETRYABLE;
  }
  r->owner_ = this;
  r->base_ = va;
  r->nr_pages_ = nr;
  r->watermark_ = nr;
  try {
    r->pages_.resize(nr);
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

void pager_device::destroy_region(pager_region* r) noexcept {
  if (r == nullptr) return;
  std::lock_guard lock(mutex_);
  if (r->resident_ > 0) sync_locked();
  for (uint64_t i = 0; i < r->nr_pages_; ++i)
    if (r->pages_[i].resident) free_page_locked(*r, i, ORCH_RELEASE_TARGETED);
  backend_->va_free(device_, r->base_, r->nr_pages_ * options_.page_size);
  priority_.erase(r->position_);
  delete r;
}

orch_status pager_device::region_info(pager_region* r, orch_region_info* info) {
  if (info == nullptr || info->struct_size < sizeof(orch_region_info)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  info->base = r->base_;
  info->page_size = options_.page_size;
  info->nr_pages = r->nr_pages_;
  info->watermark = r->watermark_;
  info->watermark_limit = r->limit_;
  info->resident_pages = r->resident_;
  info->pinned_pages = r->pinned_;
  return ORCH_OK;
}

orch_status pager_device::prioritize(pager_region* r, bool to_top) {
  std::lock_guard lock(mutex_);
  // splice relinks the node: it cannot allocate or throw, and r->position_ stays valid. An
  // erase followed by a push could fail after the erase and leave position_ dangling.
  priority_.splice(to_top ? priority_.begin() : priority_.end(), priority_, r->position_);
  r->watermark_ = r->nr_pages_;  // the only way back for evicted pages (§4.4)
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
  std::lock_guard lock(mutex_);
  ++stats_.faults;
  if (newly_mapped != nullptr) *newly_mapped = 0;
  // 1. The stopgap: react to a polled spike even when no allocation hook ran.
  free_pages_locked(deficit_locked(0));
  // 2. The fast path: above the watermark (or past the clamp) nothing is mapped.
  if (end > r->watermark_) return oom_locked();
  uint64_t mapped = 0;
  bool checked = false;
  for (uint64_t i = first; i < end; ++i) {
    if (r->pages_[i].resident) {
      ++stats_.hits;
      continue;
    }
    if (!checked) {
      checked = true;
      rationalise_locked(*r, i, end);
      if (end > r->watermark_) return oom_locked();
    }
    if (deficit_locked(page) > 0) {
      free_pages_locked(static_cast<int64_t>(page));
      if (end > r->watermark_) return oom_locked();
    }
    orch_status st = map_page_locked(*r, i);
    if (st == ORCH_OOM_RETRYABLE) {
      free_pages_locked(static_cast<int64_t>(page));
      if (end > r->watermark_) return oom_locked();
      st = map_page_locked(*r, i);  // one retry, budget not re-checked; any failure is an error
    }
    if (st != ORCH_OK) {
      // Pages mapped earlier in this call stay resident and unpinned (no rollback, §4.2).
      ++stats_.errors;
      if (host_ != nullptr)
        host_->log(ORCH_LOG_ERROR, "device %d: fault failed mapping page %llu",
                   options_.ordinal, static_cast<unsigned long long>(i));
      return ORCH_DEVICE_ERROR;
    }
    ++stats_.misses;
    ++mapped;
  }
  // Only after every page succeeded are the pins taken.
  for (uint64_t i = first; i < end; ++i)
    if (r->pages_[i].pins++ == 0) ++r->pinned_;
  if (sig != nullptr)
    for (uint64_t i = first; i < end; ++i) sig[i - first] = r->pages_[i].serial;
  if (sig_len != nullptr) *sig_len = end - first;
  if (newly_mapped != nullptr) *newly_mapped = mapped;
  return ORCH_OK;
}

orch_status pager_device::unpin(pager_region* r, uint64_t offset, uint64_t size) {
  if (size == 0 || offset + size < offset) return ORCH_INVALID;
  const uint64_t page = options_.page_size;
  std::lock_guard lock(mutex_);
  const uint64_t first = offset / page;
  const uint64_t end = std::min(ceil_div(offset + size, page), r->nr_pages_);
  const bool above = end > r->watermark_;
  if (above) sync_locked();
  for (uint64_t i = first; i < end; ++i) {
    page_slot& p = r->pages_[i];
    if (p.pins == 0) continue;  // saturating, as aimdo
    if (--p.pins == 0) {
      --r->pinned_;
      // Evicted while in use: the watermark already passed it, so it goes now.
      if (i >= r->watermark_ && p.resident) free_page_locked(*r, i, ORCH_RELEASE_UNPIN);
    }
  }
  if (above) sync_locked();
  return ORCH_OK;
}

// ---- watermark family (§4.5) ------------------------------------------------------------------

orch_status pager_device::set_watermark(pager_region* r, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  const uint64_t target = std::min(ceil_div(bytes, options_.page_size), r->nr_pages_);
  if (target >= r->watermark_) {
    r->watermark_ = target;
    return ORCH_OK;
  }
  bool synced = false;
  while (r->watermark_ > target) lower_one_locked(*r, synced);  // syncs only before (§4.8)
  return ORCH_OK;
}

orch_status pager_device::set_watermark_limit(pager_region* r, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  r->limit_ = std::min(ceil_div(bytes, options_.page_size), r->nr_pages_);
  return ORCH_OK;
}

orch_status pager_device::reset_watermark_limits() {
  std::lock_guard lock(mutex_);
  for (pager_region* r : priority_) r->limit_ = 0;
  return ORCH_OK;
}

orch_status pager_device::evict(pager_region* r, uint64_t bytes, uint64_t* freed) {
  std::lock_guard lock(mutex_);
  const uint64_t need = ceil_div(bytes, options_.page_size);
  uint64_t pages = 0;
  bool synced = false;
  while (pages < need && r->watermark_ > r->limit_)
    if (lower_one_locked(*r, synced)) ++pages;
  if (synced) sync_locked();
  if (freed != nullptr) *freed = pages * options_.page_size;
  return ORCH_OK;
}

orch_status pager_device::reclaim(uint64_t bytes, uint32_t flags, uint64_t* freed) {
  std::unique_lock lock(mutex_, std::defer_lock);
  if ((flags & ORCH_RECLAIM_TRY_LOCK) != 0) {
    if (!lock.try_lock()) {
      if (freed != nullptr) *freed = 0;
      return ORCH_OOM_RETRYABLE;  // "not now": the model thread holds the pager
    }
  } else {
    lock.lock();
  }
  ++stats_.reclaims;
  const int64_t target = (flags & ORCH_RECLAIM_DEFICIT) != 0 ? deficit_locked(bytes)
                                                              : signed_request(bytes);
  const uint64_t pages = free_pages_locked(target);
  if (freed != nullptr) *freed = pages * options_.page_size;
  return ORCH_OK;
}

// ---- queries ----------------------------------------------------------------------------------

orch_status pager_device::residency(pager_region* r, uint8_t* flags, size_t cap, size_t* len) {
  std::lock_guard lock(mutex_);
  if (len != nullptr) *len = r->nr_pages_;
  if (flags == nullptr || cap < r->nr_pages_) return ORCH_INVALID;
  for (uint64_t i = 0; i < r->nr_pages_; ++i) {
    const page_slot& p = r->pages_[i];
    flags[i] = static_cast<uint8_t>((p.resident ? ORCH_PAGE_RESIDENT : 0u) |
                                    (p.pins > 0 ? ORCH_PAGE_PINNED : 0u));
  }
  return ORCH_OK;
}

orch_status pager_device::region_resident_bytes(pager_region* r, uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  *bytes = r->resident_ * options_.page_size;
  return ORCH_OK;
}

orch_status pager_device::resident_bytes(uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  *bytes = page_bytes_;
  return ORCH_OK;
}

orch_status pager_device::pinned_bytes(uint64_t* bytes) {
  if (bytes == nullptr) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  uint64_t pinned = 0;
  for (const pager_region* r : priority_) pinned += r->pinned_;
  *bytes = pinned * options_.page_size;
  return ORCH_OK;
}

orch_status pager_device::budget_deficit(uint64_t request, int64_t* deficit) {
  if (deficit == nullptr) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  *deficit = deficit_locked(request);
  return ORCH_OK;
}

orch_status pager_device::poll() {
  std::lock_guard lock(mutex_);
  if (options_.pressure_source == ORCH_PRESSURE_NONE) return ORCH_OK;
  const uint64_t before = stats_.polls;
  poll_locked(true);
  return stats_.polls > before ? ORCH_OK : ORCH_DEVICE_ERROR;
}

orch_status pager_device::account_external(int64_t delta) {
  std::lock_guard lock(mutex_);
  if (external_bytes_ + delta < 0) return ORCH_INVALID;
  external_bytes_ += delta;
  return ORCH_OK;
}

orch_status pager_device::usage(orch_pager_usage* out) {
  if (out == nullptr || out->struct_size < sizeof(orch_pager_usage)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  out->capacity = static_cast<uint64_t>(capacity_locked());
  out->page_bytes = page_bytes_;
  out->external_bytes = static_cast<uint64_t>(external_bytes_);
  out->last_polled_free = last_free_;
  return ORCH_OK;
}

orch_status pager_device::stats(orch_pager_stats* out) {
  if (out == nullptr || out->struct_size < sizeof(orch_pager_stats)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  const uint32_t size = out->struct_size;
  *out = stats_;
  out->struct_size = size;
  return ORCH_OK;
}

orch_status pager_device::set_budget_cap(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  options_.budget_cap = bytes;
  return ORCH_OK;
}

orch_status pager_device::set_pressure_source(uint32_t source) {
  if (source > ORCH_PRESSURE_NONE) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  options_.pressure_source = source;
  polled_ = false;
  return ORCH_OK;
}

}  // namespace orch::plugin_detail
