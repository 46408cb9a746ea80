// budget: the one pinned budget, as a pure function of readings (docs/shared-memory.md). It is
// ComfyUI's MAX_PINNED_MEMORY (docs/references.md, ComfyUI §1.4), computed once by the host
// instead of once per process (seed: "Every process budgets pinned memory independently"):
//
//   Windows:   0.40 · RAM
//   elsewhere: max(0.40 · RAM, min(0.90 · RAM, RAM − 4 GiB, RAM + swap − 16 GiB))
//
// RAM is clamped to the effective cgroup limit, and swap counts as 0 under a cgroup limit
// (docs/references.md, ComfyUI §1.7). The readings come from cgroup_probe.hpp, or from tests.
#pragma once

#include <cstdint>
#include <optional>

namespace orch::ipc {

enum class os_family { linux_like, windows };

struct memory_readings {
  os_family os = os_family::linux_like;
  std::uint64_t physical_ram = 0;             // MemTotal, bytes
  std::optional<std::uint64_t> cgroup_limit;  // effective limit, bytes; none when unset
  std::uint64_t swap_total = 0;               // non-zram swap, bytes
};

struct pinned_budget {
  std::uint64_t bytes = 0;          // the budget
  std::uint64_t effective_ram = 0;  // RAM after the cgroup clamp
  std::uint64_t counted_swap = 0;   // swap that entered the formula
};

// Pure and total: defined for every input. The arithmetic saturates, so no reading, however
// large, overflows or wraps (a huge RAM or swap reading yields a huge budget, never a tiny one).
pinned_budget compute_pinned_budget(const memory_readings& readings) noexcept;

}  // namespace orch::ipc
