// What both driver stand-ins keep of their devices (docs/gpu.md, "The driver stand-ins"): address
// reservations, physical allocations, mappings and host registrations, checked as the drivers
// document them (sizes in granules, a map inside a reservation onto a range not already mapped,
// unmap of whole mappings, release deferred while mapped); each device's memory (its size, this
// process's allocations, other processes' usage); and the faults a test injects. The
// memory is bookkeeping over real host address space: a reservation is an mmap(PROT_NONE) range,
// so every address handed out is unique and never dereferenceable; nothing is backed.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "standin_control.h"

namespace orch::standin {

enum class outcome { ok, invalid, oom, not_registered, already_registered };

inline uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return (end != nullptr && *end == '\0') ? n : fallback;
}

class device_model {
 public:
  static constexpr uint64_t granule = 2ull << 20;

  // `devices` devices of `total` bytes each. Addresses are one space for all of them (as CUDA's
  // unified addressing and HIP's are); memory is each device's own.
  device_model(int32_t devices, uint64_t total)
      : default_total_(total),
        memory_(static_cast<size_t>(devices > 0 ? devices : 0), orch_standin_memory{total, 0, 0}) {}

  int32_t devices() const { return static_cast<int32_t>(memory_.size()); }
  bool has(int32_t device) const { return device >= 0 && device < devices(); }
  // Callers check has(device) first.
  uint64_t total(int32_t device) const { return at(device).total_bytes; }
  // What the driver reports free: the device less this process's allocations and other
  // processes' usage (subtractions only, so an "other" near UINT64_MAX cannot wrap).
  uint64_t free_bytes(int32_t device) const {
    const orch_standin_memory& m = at(device);
    const uint64_t free = m.created_bytes < m.total_bytes ? m.total_bytes - m.created_bytes : 0;
    return m.other_bytes < free ? free - m.other_bytes : 0;
  }
  bool memory(int32_t device, orch_standin_memory* out) const {
    if (!has(device) || out == nullptr) return false;
    *out = at(device);
    return true;
  }
  bool set_other_usage(int32_t device, uint64_t bytes) {
    if (!has(device)) return false;
    at(device).other_bytes = bytes;
    return true;
  }
  // 0: the size the driver started with.
  bool set_total(int32_t device, uint64_t bytes) {
    if (!has(device)) return false;
    const uint64_t total = bytes == 0 ? default_total_ : bytes;
    if (at(device).created_bytes > total) return false;
    at(device).total_bytes = total;
    return true;
  }

  // Faults ----------------------------------------------------------------------------------
  // count > 0: the next `count` calls; ORCH_STANDIN_ALWAYS (any count < 0): every call; 0 clears.
  void fail(const char* entry, int status, int count) {
    failures_[entry] = failure{status, count};
  }
  // The injected status for this call of `entry`, or 0 when it should run.
  int injected(const char* entry) {
    auto it = failures_.find(entry);
    if (it == failures_.end() || it->second.count == 0) return 0;
    if (it->second.count > 0) --it->second.count;
    return it->second.status;
  }
  bool lost = false;

  // Synchronisation ---------------------------------------------------------------------------
  void synced(bool ok) {
    if (ok) {
      ++stats_.syncs;
      unsafe_window_ = false;
    } else {
      ++stats_.failed_syncs;
      unsafe_window_ = true;  // the device may still be reading anything mapped
    }
  }

  // Virtual memory ----------------------------------------------------------------------------
  outcome reserve(uint64_t size, uint64_t alignment, uint64_t* out) {
    if (out == nullptr || size == 0 || size % granule != 0) return outcome::invalid;
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) return outcome::invalid;
    // The driver's reservations start on the granule (or the alignment asked, if larger); mmap
    // aligns only to the host page (a large one lands on 2 MiB on most kernels, not under
    // valgrind), so reserve the slack and trim both ends.
    const uint64_t align = alignment > granule ? alignment : granule;
    void* p = ::mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (p == MAP_FAILED) return outcome::oom;
    const auto start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t va = (start + align - 1) & ~(uintptr_t{align} - 1);
    if (va > start) ::munmap(p, va - start);
    if (const uintptr_t tail = start + size + align - (va + size); tail != 0)
      ::munmap(reinterpret_cast<void*>(va + size), tail);
    reservations_[va] = size;
    *out = va;
    return outcome::ok;
  }
  outcome address_free(uint64_t va, uint64_t size) {
    auto it = reservations_.find(va);
    if (it == reservations_.end() || it->second != size) return outcome::invalid;
    auto m = mappings_.lower_bound(va);
    if (m != mappings_.end() && m->first < va + size) return outcome::invalid;  // still mapped
    ::munmap(reinterpret_cast<void*>(static_cast<uintptr_t>(va)), size);
    reservations_.erase(it);
    return outcome::ok;
  }
  // On device `ordinal`: out of memory where the size exceeds what is free there, other
  // processes' usage included (as on a card they share).
  outcome create(uint64_t size, int32_t ordinal, uint64_t* out) {
    if (out == nullptr || size == 0 || size % granule != 0) return outcome::invalid;
    if (!has(ordinal)) return outcome::invalid;
    if (size > free_bytes(ordinal)) return outcome::oom;
    const uint64_t h = next_handle_++;
    allocations_[h] = allocation{size, 0, false, ordinal};
    at(ordinal).created_bytes += size;
    ++stats_.creates;
    *out = h;
    return outcome::ok;
  }
  outcome release(uint64_t h) {
    auto it = allocations_.find(h);
    if (it == allocations_.end() || it->second.released) return outcome::invalid;
    ++stats_.releases;
    if (it->second.maps > 0) {
      // The driver frees it when its last mapping goes (cuMemRelease's documented rule).
      it->second.released = true;
      if (unsafe_window_) ++stats_.unsafe_frees;
      return outcome::ok;
    }
    at(it->second.device).created_bytes -= it->second.size;
    allocations_.erase(it);
    return outcome::ok;
  }
  outcome map(uint64_t va, uint64_t size, uint64_t offset, uint64_t h) {
    if (size == 0 || size % granule != 0 || va % granule != 0 || offset != 0)
      return outcome::invalid;
    auto a = allocations_.find(h);
    if (a == allocations_.end() || a->second.released || size > a->second.size)
      return outcome::invalid;
    if (!inside_reservation(va, size)) return outcome::invalid;
    if (overlaps_mapping(va, size)) return outcome::invalid;
    mappings_[va] = mapping{size, h, false};
    ++a->second.maps;
    mapped_ += size;
    return outcome::ok;
  }
  outcome set_access(uint64_t va, uint64_t size) {
    auto m = mappings_.find(va);
    if (m == mappings_.end() || m->second.size != size) return outcome::invalid;
    m->second.accessible = true;
    return outcome::ok;
  }
  // Whole mappings only: [va, va + size) must start at one and end at the end of one.
  outcome unmap(uint64_t va, uint64_t size) {
    auto first = mappings_.find(va);
    if (first == mappings_.end() || size == 0) return outcome::invalid;
    uint64_t covered = 0;
    auto it = first;
    while (it != mappings_.end() && it->first == va + covered && covered < size) {
      covered += it->second.size;
      ++it;
    }
    if (covered != size) return outcome::invalid;
    if (unsafe_window_) ++stats_.unsafe_frees;
    for (auto m = first; m != it;) {
      auto a = allocations_.find(m->second.handle);
      if (a != allocations_.end() && --a->second.maps == 0 && a->second.released) {
        at(a->second.device).created_bytes -= a->second.size;
        allocations_.erase(a);
      }
      mapped_ -= m->second.size;
      m = mappings_.erase(m);
    }
    return outcome::ok;
  }

  // Host registration ---------------------------------------------------------------------------
  outcome host_register(const void* p, uint64_t size) {
    if (p == nullptr || size == 0) return outcome::invalid;
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (registered_.count(a) != 0) return outcome::already_registered;
    registered_[a] = size;
    return outcome::ok;
  }
  outcome host_unregister(const void* p) {
    if (registered_.erase(reinterpret_cast<uintptr_t>(p)) == 0) return outcome::not_registered;
    return outcome::ok;
  }

  orch_standin_stats stats() const {
    orch_standin_stats s = stats_;
    s.created_bytes = 0;
    for (const orch_standin_memory& m : memory_) s.created_bytes += m.created_bytes;
    s.mapped_bytes = mapped_;
    s.reservations = reservations_.size();
    s.registered = registered_.size();
    return s;
  }

 private:
  struct failure {
    int status;
    int count;
  };
  struct allocation {
    uint64_t size;
    uint32_t maps;
    bool released;
    int32_t device;
  };
  struct mapping {
    uint64_t size;
    uint64_t handle;
    bool accessible;
  };

  bool inside_reservation(uint64_t va, uint64_t size) const {
    auto it = reservations_.upper_bound(va);
    if (it == reservations_.begin()) return false;
    --it;
    return va + size <= it->first + it->second;
  }
  bool overlaps_mapping(uint64_t va, uint64_t size) const {
    auto it = mappings_.lower_bound(va);
    if (it != mappings_.end() && it->first < va + size) return true;
    if (it == mappings_.begin()) return false;
    --it;
    return it->first + it->second.size > va;
  }

  orch_standin_memory& at(int32_t device) { return memory_[static_cast<size_t>(device)]; }
  const orch_standin_memory& at(int32_t device) const {
    return memory_[static_cast<size_t>(device)];
  }

  uint64_t default_total_;
  std::vector<orch_standin_memory> memory_;
  uint64_t mapped_ = 0;
  uint64_t next_handle_ = 1;
  bool unsafe_window_ = false;
  std::map<std::string, failure> failures_;
  std::map<uint64_t, uint64_t> reservations_;
  std::map<uint64_t, allocation> allocations_;
  std::map<uint64_t, mapping> mappings_;
  std::map<uintptr_t, uint64_t> registered_;
  orch_standin_stats stats_{};
};

}  // namespace orch::standin
