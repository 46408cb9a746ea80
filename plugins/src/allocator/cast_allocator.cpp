#include "cast_allocator.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "../common/struct_prefix.hpp"

namespace orch::plugin_detail {
namespace {

uint64_t round_up(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

}  // namespace

orch_status cast_allocator::open(const orch_allocator_config& config, uint32_t streams,
                                 const host_link* host, cast_allocator** out) {
  // Memory comes from the pager's device, or (no pager: a ledger worker) from a backend device
  // given directly, when the caller's struct carries those appended fields.
  const bool has_backend_fields = ORCH_HAS_FIELD(&config, device);
  const bool via_pager = config.pager_api != nullptr && config.pager != nullptr;
  if (streams > 0 && !via_pager &&
      (!has_backend_fields || config.backend_api == nullptr || config.device == nullptr))
    return ORCH_INVALID;
  if (streams > 0 && via_pager &&
      (!ORCH_HAS_FIELD(config.pager_api, device) || config.pager_api->backend == nullptr ||
       config.pager_api->device == nullptr))
    return ORCH_INVALID;
  auto* a = new (std::nothrow) cast_allocator;
  if (a == nullptr) return ORCH_HOST_OOM;
  a->host_ = host;
  a->ordinal_ = config.ordinal;
  a->stats_.struct_size = sizeof a->stats_;
  a->stats_.streams = streams;
  if (streams > 0) {
    if (via_pager) {
      a->pager_api_ = config.pager_api;
      a->pager_ = config.pager;
      a->backend_ = config.pager_api->backend(config.pager);
      a->device_ = config.pager_api->device(config.pager);
    } else {
      a->backend_ = config.backend_api;
      a->device_ = config.device;
    }
    if (a->backend_ == nullptr || a->device_ == nullptr ||
        a->backend_->granularity(a->device_, &a->granularity_) != ORCH_OK ||
        a->granularity_ == 0) {
      delete a;
      return ORCH_INVALID;
    }
  }
  a->chunk_ = round_up(config.chunk_size == 0 ? default_chunk : config.chunk_size,
                       a->granularity_);
  a->reserve_ = round_up(config.reserve_size == 0 ? default_reserve : config.reserve_size,
                         a->chunk_);
  a->replace_threshold_ =
      config.replace_threshold == 0 ? default_replace_threshold : config.replace_threshold;
  try {
    a->buffers_.resize(streams);
  } catch (...) {
    delete a;
    throw;
  }
  *out = a;
  return ORCH_OK;
}

cast_allocator::~cast_allocator() {
  reset();
  std::lock_guard lock(mutex_);
  // Tensors torch never freed: left mapped, as everything else, when the device cannot say it is
  // done with them.
  if (!torch_.empty() && !sync_before_free_locked("tensors' blocks at close")) return;
  for (auto& [ptr, block] : torch_) {
    backend_->unmap(device_, block.va, block.size);
    backend_->phys_release(device_, block.handle);
    backend_->va_free(device_, block.va, block.size);
    account(-static_cast<int64_t>(block.size));
  }
  torch_.clear();
}

void cast_allocator::reclaim(uint64_t bytes, uint32_t flags) noexcept {
  uint64_t freed = 0;
  if (pager_api_ != nullptr) pager_api_->reclaim(pager_, bytes, flags, &freed);
}

void cast_allocator::account(int64_t delta) noexcept {
  if (pager_api_ != nullptr) pager_api_->account_external(pager_, delta);
}

// Creates and maps `size` bytes at va. Reclaims through the pager first (the deficit of the
// request, try-lock: an allocation path never waits for the model thread), and once more
// after a driver OOM before the single retry (docs/references.md, aimdo §4.7 and §4.8).
orch_status cast_allocator::commit_locked(uint64_t va, uint64_t size, uint64_t* handle) noexcept {
  reclaim(size, ORCH_RECLAIM_TRY_LOCK | ORCH_RECLAIM_DEFICIT);
  orch_status st = backend_->phys_create(device_, size, handle);
  if (st == ORCH_OOM_RETRYABLE) {
    reclaim(size, ORCH_RECLAIM_TRY_LOCK);
    st = backend_->phys_create(device_, size, handle);
  }
  if (st != ORCH_OK) return st;
  if (const orch_status m = backend_->map(device_, va, size, *handle); m != ORCH_OK) {
    backend_->phys_release(device_, *handle);
    return m;
  }
  account(static_cast<int64_t>(size));
  return ORCH_OK;
}

orch_status cast_allocator::grow_locked(buffer& b) {
  b.handles.reserve(b.handles.size() + 1);  // may throw before anything is committed
  uint64_t handle = 0;
  if (const orch_status st = commit_locked(b.va + b.committed, chunk_, &handle); st != ORCH_OK)
    return st;
  b.handles.push_back(handle);
  b.committed += chunk_;
  ++stats_.grows;
  note_committed_locked();
  return ORCH_OK;
}

// The device must be done with memory before it is unmapped: a failed synchronisation leaves it
// mapped and is said to the host (docs/gpu.md, "Driver statuses").
bool cast_allocator::sync_before_free_locked(const char* what) noexcept {
  const orch_status st = backend_->synchronize(device_);
  if (st == ORCH_OK) return true;
  if (host_ != nullptr)
    host_->log(ORCH_LOG_ERROR,
               "device %d: synchronize failed (status %d) before freeing %s: it stays mapped, as "
               "the device may still read it",
               ordinal_, static_cast<int>(st), what);
  return false;
}

orch_status cast_allocator::release_locked(buffer& b) noexcept {
  if (b.reserved == 0) return ORCH_OK;
  if (!b.handles.empty() && !sync_before_free_locked("a cast buffer")) return ORCH_DEVICE_ERROR;
  for (size_t i = 0; i < b.handles.size(); ++i) {
    backend_->unmap(device_, b.va + i * chunk_, chunk_);
    backend_->phys_release(device_, b.handles[i]);
  }
  backend_->va_free(device_, b.va, b.reserved);
  account(-static_cast<int64_t>(b.committed));
  if (host_ != nullptr && b.committed > 0)
    host_->report_release(ORCH_RELEASE_RESET, ordinal_, b.committed);
  b = buffer{};
  return ORCH_OK;
}

void cast_allocator::note_committed_locked() noexcept {
  uint64_t committed = 0;
  for (const buffer& b : buffers_) {
    committed += b.committed;
    stats_.largest_buffer = std::max(stats_.largest_buffer, b.committed);
  }
  stats_.committed = committed;
  stats_.high_water = std::max(stats_.high_water, committed);
  uint64_t retired = 0;
  for (const buffer& b : retired_) retired += b.committed;
  stats_.retired = retired;
}

orch_status cast_allocator::cast_buffer(uint32_t stream, uint64_t size, uint64_t* address) {
  if (address == nullptr || size == 0) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  if (buffers_.empty()) {
    // No offload stream (cpu): a per-call buffer, which is Work rather than Carry (seed "Carry").
    if (stream != 0) return ORCH_INVALID;
    std::free(per_call_);
    per_call_ = std::malloc(size);
    if (per_call_ == nullptr) return ORCH_HOST_OOM;
    *address = reinterpret_cast<uintptr_t>(per_call_);
    return ORCH_OK;
  }
  if (stream >= buffers_.size()) return ORCH_INVALID;
  buffer& b = buffers_[stream];
  if (size > b.reserved) {
    // Replacement: a larger reservation takes over. A large old buffer goes back to the device
    // at once; a small one waits for the next reset.
    if (b.reserved != 0) {
      ++stats_.replaced;
      if (b.committed > replace_threshold_) {
        if (const orch_status st = release_locked(b); st != ORCH_OK) return st;
      } else {
        retired_.push_back(b);
        b = buffer{};
      }
    }
    const uint64_t reserve = std::max(reserve_, round_up(size, chunk_));
    uint64_t va = 0;
    if (const orch_status st = backend_->va_reserve(device_, reserve, &va); st != ORCH_OK) {
      note_committed_locked();
      return st == ORCH_OOM_RETRYABLE ? st : ORCH_DEVICE_ERROR;
    }
    b.va = va;
    b.reserved = reserve;
  }
  while (b.committed < size)
    if (const orch_status st = grow_locked(b); st != ORCH_OK) {
      note_committed_locked();
      return st;
    }
  note_committed_locked();
  *address = b.va;
  return ORCH_OK;
}

orch_status cast_allocator::reset() {
  std::lock_guard lock(mutex_);
  std::free(per_call_);
  per_call_ = nullptr;
  orch_status result = ORCH_OK;
  for (buffer& b : buffers_)
    if (release_locked(b) != ORCH_OK) result = ORCH_DEVICE_ERROR;
  // A retired buffer that could not be freed stays retired, for the next reset.
  size_t kept = 0;
  for (buffer& b : retired_)
    if (release_locked(b) != ORCH_OK) retired_[kept++] = b;
  retired_.resize(kept);
  ++stats_.resets;
  note_committed_locked();
  return result;
}

orch_status cast_allocator::stats(orch_cast_stats* out) {
  if (out == nullptr || !ORCH_HAS_FIELD(out, torch_bytes)) return ORCH_INVALID;
  std::lock_guard lock(mutex_);
  orch_cast_stats s = stats_;
  s.torch_bytes = torch_bytes_;
  write_prefix(out, s);
  return ORCH_OK;
}

void* cast_allocator::torch_malloc(uint64_t size) noexcept {
  if (size == 0) return nullptr;
  std::lock_guard lock(mutex_);
  if (buffers_.empty()) return std::malloc(size);  // cpu: host memory
  const uint64_t rounded = round_up(size, granularity_);
  uint64_t va = 0;
  if (backend_->va_reserve(device_, rounded, &va) != ORCH_OK) return nullptr;
  uint64_t handle = 0;
  if (commit_locked(va, rounded, &handle) != ORCH_OK) {
    backend_->va_free(device_, va, rounded);
    return nullptr;
  }
  void* host = backend_->host_pointer != nullptr ? backend_->host_pointer(device_, va) : nullptr;
  void* ptr = host != nullptr ? host : reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  try {
    torch_.emplace(reinterpret_cast<uintptr_t>(ptr), torch_block{va, rounded, handle});
  } catch (...) {
    backend_->unmap(device_, va, rounded);
    backend_->phys_release(device_, handle);
    backend_->va_free(device_, va, rounded);
    account(-static_cast<int64_t>(rounded));
    return nullptr;
  }
  torch_bytes_ += rounded;
  return ptr;
}

void cast_allocator::torch_free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  if (buffers_.empty()) {
    std::free(ptr);
    return;
  }
  auto it = torch_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == torch_.end()) {
    // A rogue free (aimdo 0.5.3 tolerates them): log and carry on.
    if (host_ != nullptr) host_->log(ORCH_LOG_DEBUG, "torch_free: unknown pointer ignored");
    return;
  }
  const torch_block block = it->second;
  if (!sync_before_free_locked("a tensor's block")) return;  // kept: torch may free it again
  torch_.erase(it);
  backend_->unmap(device_, block.va, block.size);
  backend_->phys_release(device_, block.handle);
  backend_->va_free(device_, block.va, block.size);
  account(-static_cast<int64_t>(block.size));
  torch_bytes_ -= block.size;
}

}  // namespace orch::plugin_detail
