// cgroup_probe: the readings the budget formula needs, taken from /proc and /sys the way
// ComfyUI's comfy/system_memory.py and get_disk_swap_total() take them
// (docs/references.md, ComfyUI §1.4 and §1.7). Every function reads below a `root` so tests run
// them on fixture trees (tests/unit/ipc/fixtures/) instead of the build machine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "orch/ipc/pinned_budget.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

// The field `key` ("MemTotal", "MemAvailable") of <root>/proc/meminfo, in bytes: the one reader
// of that file. Errors: "no_meminfo" (the file cannot be read, or has no such line).
result<std::uint64_t> read_meminfo(const std::filesystem::path& root, const std::string& key);

// MemTotal from <root>/proc/meminfo, in bytes. Errors: "no_meminfo".
result<std::uint64_t> read_physical_ram(const std::filesystem::path& root);

// The effective cgroup memory limit. Scopes come from <root>/proc/self/cgroup: an empty
// controller list is v2 (mounted at /sys/fs/cgroup), a "memory" controller is v1 (mounted at
// /sys/fs/cgroup/memory). Each scope's directory is walked up to its mount root, nearest first,
// then the two roots themselves are read. v2 memory.max ("max": none) and v1
// memory.limit_in_bytes (>= 2^62: none) count; the smallest limit wins; a limit >= physical_ram
// is no limit. Unreadable files are skipped: no cgroup means no limit.
std::optional<std::uint64_t> find_cgroup_limit(const std::filesystem::path& root,
                                               std::uint64_t physical_ram);

// Total swap in bytes from <root>/proc/swaps, skipping devices whose resolved basename starts with
// "zram" (compressed RAM is not disk). 0 when the file is absent.
std::uint64_t read_swap_total(const std::filesystem::path& root);

// All readings for this OS family. Errors: those of read_physical_ram.
result<memory_readings> probe_memory_readings(const std::filesystem::path& root = "/",
                                              os_family os = os_family::linux_like);

}  // namespace orch::ipc
