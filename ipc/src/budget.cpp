#include "orch/ipc/budget.hpp"

#include <algorithm>

namespace orch::ipc {
namespace {

constexpr std::int64_t gib = std::int64_t{1} << 30;
// 2^62 bytes: far beyond any machine, so the signed arithmetic below cannot overflow.
constexpr std::uint64_t sane_max = std::uint64_t{1} << 62;

}  // namespace

pinned_budget compute_pinned_budget(const memory_readings& readings) noexcept {
  std::uint64_t ram = std::min(readings.physical_ram, sane_max);
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
  // Under a cgroup limit, swap is not counted (comfyui-memory.md §1.4: swap = 0 when
  // cgroup_memory_limit() is not None; §1.7: a limit >= physical RAM is no limit).
  const std::uint64_t swap = limited ? 0 : std::min(readings.swap_total, sane_max);
  out.counted_swap = swap;
  const auto r = static_cast<std::int64_t>(ram);
  const std::int64_t ninety_percent = r / 10 * 9 + (r % 10) * 9 / 10;
  const std::int64_t inner =
      std::min({ninety_percent, r - 4 * gib, r + static_cast<std::int64_t>(swap) - 16 * gib});
  out.bytes = static_cast<std::uint64_t>(std::max(static_cast<std::int64_t>(forty_percent), inner));
  return out;
}

}  // namespace orch::ipc
