#include "orch/ipc/pinned_budget.hpp"

#include <algorithm>

#include "saturating.hpp"

namespace orch::ipc {
namespace {

constexpr std::uint64_t gib = std::uint64_t{1} << 30;

// The formula is evaluated in unsigned arithmetic that saturates instead of wrapping or
// overflowing (detail::saturating_add), so it is defined for every reading, a corrupt /proc value
// included. A difference that would go below 0 reads as 0 (detail::floored_sub): the outer max
// with 0.40·RAM then picks 0.40·RAM, exactly as the signed formula does for a negative term.
using detail::floored_sub;
using detail::saturating_add;

}  // namespace

pinned_budget compute_pinned_budget(const memory_readings& readings) noexcept {
  std::uint64_t ram = readings.physical_ram;
  const bool limited = readings.cgroup_limit.has_value() && *readings.cgroup_limit < ram;
  if (limited) ram = *readings.cgroup_limit;
  pinned_budget out;
  out.effective_ram = ram;
  // 0.40·RAM as ram·2/5 in integers; ComfyUI computes it in floats and the difference is < 1 byte.
  const std::uint64_t forty_percent = ram / 5 * 2 + (ram % 5) * 2 / 5;
  if (readings.os == os_family::windows) {
    out.bytes = forty_percent;
    return out;
  }
  // Under a cgroup limit, swap is not counted (docs/references.md, ComfyUI §1.4: swap = 0 when
  // cgroup_memory_limit() is not None; §1.7: a limit >= physical RAM is no limit).
  const std::uint64_t swap = limited ? 0 : readings.swap_total;
  out.counted_swap = swap;
  const std::uint64_t ninety_percent = ram / 10 * 9 + (ram % 10) * 9 / 10;
  const std::uint64_t inner = std::min({ninety_percent, floored_sub(ram, 4 * gib),
                                        floored_sub(saturating_add(ram, swap), 16 * gib)});
  out.bytes = std::max(forty_percent, inner);
  return out;
}

}  // namespace orch::ipc
