// The allocator policy (docs/references.md: aimdo §4.7, §6.4, seed "Carry"): cast buffers, one per
// offload stream, grow-only in chunks and VA-stable (aimdo's VRAMBuffer), reclaiming through the
// pager before every growth; and the torch pluggable-allocator path, which never refuses for
// budget reasons. Backend-agnostic: memory comes from the pager's own backend and device, so
// every byte lands in the pager's budget.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "../common/host_link.hpp"
#include "orch/plugin/allocator.h"
#include "orch/plugin/backend.h"

namespace orch::plugin_detail {

inline constexpr uint64_t default_chunk = 16ull << 20;          // VRAMBuffer chunk (§2.3)
inline constexpr uint64_t default_reserve = 16ull << 30;        // ComfyUI's 16 GiB reservation
inline constexpr uint64_t default_replace_threshold = 50000000;  // "over 50 MB" (ComfyUI)

class cast_allocator {
 public:
  // streams: the resolved count (0 on cpu: per-call host buffers). pager may be null only then.
  static orch_status open(const orch_allocator_config& config, uint32_t streams,
                          const host_link* host, cast_allocator** out);
  ~cast_allocator();  // releases every buffer and torch allocation

  cast_allocator(const cast_allocator&) = delete;
  cast_allocator& operator=(const cast_allocator&) = delete;

  int32_t ordinal() const noexcept { return ordinal_; }
  orch_status cast_buffer(uint32_t stream, uint64_t size, uint64_t* address);
  orch_status reset();
  orch_status stats(orch_cast_stats* out);

  void* torch_malloc(uint64_t size) noexcept;
  void torch_free(void* ptr) noexcept;

 private:
  struct buffer {
    uint64_t va = 0;
    uint64_t reserved = 0;
    uint64_t committed = 0;
    std::vector<uint64_t> handles;  // one per committed chunk, in address order
  };
  struct torch_block {
    uint64_t va;
    uint64_t size;
    uint64_t handle;
  };

  cast_allocator() = default;
  orch_status commit_locked(uint64_t va, uint64_t size, uint64_t* handle) noexcept;
  orch_status grow_locked(buffer& b);  // may throw std::bad_alloc (callers are guarded)
  // Frees b once the device is done with it; DEVICE_ERROR, b kept whole, when the
  // synchronisation fails (the stream may still read it).
  orch_status release_locked(buffer& b) noexcept;
  bool sync_before_free_locked(const char* what) noexcept;
  void note_committed_locked() noexcept;
  // Through the pager when there is one (it reclaims and accounts); nothing without.
  void reclaim(uint64_t bytes, uint32_t flags) noexcept;
  void account(int64_t delta) noexcept;

  std::mutex mutex_;
  const host_link* host_ = nullptr;
  int32_t ordinal_ = 0;
  uint64_t chunk_ = default_chunk;
  uint64_t reserve_ = default_reserve;
  uint64_t replace_threshold_ = default_replace_threshold;
  uint64_t granularity_ = 1;
  const orch_pager_api* pager_api_ = nullptr;
  orch_pager* pager_ = nullptr;
  const orch_backend_api* backend_ = nullptr;
  orch_device* device_ = nullptr;
  std::vector<buffer> buffers_;
  std::vector<buffer> retired_;  // replaced buffers of at most the threshold, freed at reset
  void* per_call_ = nullptr;     // cpu: the current per-call buffer
  std::map<uintptr_t, torch_block> torch_;
  uint64_t torch_bytes_ = 0;
  orch_cast_stats stats_{};
};

}  // namespace orch::plugin_detail
