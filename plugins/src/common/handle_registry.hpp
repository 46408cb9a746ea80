// The handles a plugin has given out and not yet taken back (docs/plugin-abi.md "Lifecycle").
//
// Handles are raw pointers at the C ABI, so a handle used after device_close or shutdown would
// point at freed memory. Every entry point instead looks its handle up here first: a call made
// while the plugin is down answers ORCH_NOT_INITIALISED, a handle that is not live answers
// ORCH_INVALID, and neither touches the object. While a call holds its `use`, the handle cannot
// be closed under it: closing and shutdown take the registry exclusively.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "host_link.hpp"

namespace orch::plugin_detail {

class handle_registry {
 public:
  // One call's right to use a handle. Holds the registry shared for the call's duration, so
  // calls on different handles (and a try-lock reclaim beside a fault) still run concurrently.
  class use {
   public:
    use(const handle_registry& reg, const lifecycle& life, const void* handle, uint32_t kind)
        : lock_(reg.mutex_) {
      if (!life.up()) {
        status_ = ORCH_NOT_INITIALISED;
      } else if (const auto it = reg.live_.find(handle);
                 handle == nullptr || it == reg.live_.end() || it->second.kind != kind) {
        status_ = ORCH_INVALID;
      }
    }
    orch_status status() const noexcept { return status_; }
    explicit operator bool() const noexcept { return status_ == ORCH_OK; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    orch_status status_ = ORCH_OK;
  };

  // Shared access for reading the registry (the const *_locked calls).
  std::shared_lock<std::shared_mutex> shared() const { return std::shared_lock(mutex_); }
  // Exclusive access for opening, closing and shutdown; the *_locked calls need it held.
  std::unique_lock<std::shared_mutex> exclusive() const { return std::unique_lock(mutex_); }

  // May throw std::bad_alloc: callers add before handing the handle out.
  void add_locked(const void* handle, uint32_t kind, const void* owner = nullptr) {
    live_.emplace(handle, entry{kind, owner});
  }
  bool contains_locked(const void* handle, uint32_t kind) const noexcept {
    const auto it = live_.find(handle);
    return it != live_.end() && it->second.kind == kind;
  }
  bool remove_locked(const void* handle) noexcept { return live_.erase(handle) != 0; }
  // Forgets every handle owned by `owner` (the regions of a closing pager, say).
  void remove_owned_locked(const void* owner) noexcept {
    for (auto it = live_.begin(); it != live_.end();)
      it = it->second.owner == owner ? live_.erase(it) : std::next(it);
  }
  bool any_locked(uint32_t kind) const noexcept {
    for (const auto& [h, e] : live_)
      if (e.kind == kind) return true;
    return false;
  }
  template <typename F>
  void for_each_locked(uint32_t kind, F&& f) const {
    for (const auto& [h, e] : live_)
      if (e.kind == kind) f(h);
  }
  void clear_locked() noexcept { live_.clear(); }

 private:
  struct entry {
    uint32_t kind;
    const void* owner;
  };
  mutable std::shared_mutex mutex_;
  std::map<const void*, entry> live_;
};

}  // namespace orch::plugin_detail
