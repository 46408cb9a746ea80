// control_block: one per process, in the control segment, that the host reads without sending
// any message (the heartbeat, docs/runtime.md; divergence reports, docs/memory-semantics.md).
// Layout rules from docs/references.md, anchors §8.3.4: magic/version/size header,
// fixed-width fields, hot atomics on their own cache line, sizes frozen by static_assert.
//
// Only lock-free atomics are shared (§8.3.1: a mutex held by a dead worker is gone for good).
// The stats snapshot is published with a seqlock whose payload words are themselves relaxed
// atomics, so a reader racing a writer is well defined and simply retries. A writer that dies
// halfway leaves the sequence odd; readers then give up after a bounded number of tries and
// report "writer_stalled" instead of spinning forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t control_block_magic = 0x4b4c4243u;  // "CBLK"
// 2: release and settings fields; 3: the largest cast buffer; 4: lane answers; 5: without them
inline constexpr std::uint16_t control_block_version = 5;

enum class memory_manager_kind : std::uint32_t { unknown = 0, pager = 1, ledger = 2 };
enum class plugin_slot : std::uint32_t { pager = 0, allocator = 1, backend = 2 };
inline constexpr std::uint32_t plugin_slot_count = 3;

// One loaded plugin as the process reports it (docs/plugin-abi.md). Strings are NUL padded.
struct plugin_report {
  char name[32];
  char version[24];
  std::uint32_t level;  // the protocol level it runs at (1..4), 0 when none
  std::uint32_t min_level;
  std::uint32_t max_level;
  std::uint32_t reserved;
};
static_assert(std::is_standard_layout_v<plugin_report> && sizeof(plugin_report) == 72);

// The stats a process publishes. A plain value: readers get a consistent copy.
struct stats_snapshot {
  memory_manager_kind memory_manager;
  std::uint32_t reserved;
  char memory_manager_reason[96];  // e.g. "no parent signal", "device is cpu"
  plugin_report plugins[plugin_slot_count];
  std::uint64_t device_free_bytes;  // the free-memory view this process sees
  std::uint64_t device_total_bytes;
  std::uint64_t pager_resident_bytes;
  std::uint64_t pinned_bytes;
  std::uint64_t cast_buffer_bytes;
  std::uint64_t cast_buffer_high_water;
  std::uint64_t current_epoch;
  std::uint64_t call_count;
  std::uint64_t last_boundary_release_ns;  // CLOCK_REALTIME ns of the last node-boundary release
  std::uint64_t boundary_releases;        // node-boundary releases (pager) / epoch resets (ledger)
  std::uint64_t device_pinned_bytes;      // pager pages pinned now (0 between nodes)
  std::uint64_t ledger_loaded_bytes;      // ledger: model bytes on the device now
  std::uint64_t settings_hash;            // hash of the host settings this worker applied
  std::uint64_t cast_buffer_largest;      // the largest one cast buffer so far (0: not known)
};
static_assert(std::is_standard_layout_v<stats_snapshot> &&
              std::is_trivially_copyable_v<stats_snapshot>);
static_assert(sizeof(stats_snapshot) == 432 && sizeof(stats_snapshot) % 8 == 0);

// Copies `text` into a fixed field, truncating and NUL padding.
template <std::size_t N>
void set_text(char (&field)[N], std::string_view text) noexcept {
  std::size_t i = 0;
  for (; i + 1 < N && i < text.size(); ++i) field[i] = text[i];
  for (; i < N; ++i) field[i] = '\0';
}
template <std::size_t N>
std::string_view get_text(const char (&field)[N]) noexcept {
  std::size_t n = 0;
  while (n < N && field[n] != '\0') ++n;
  return {field, n};
}

struct control_block {
  static constexpr std::size_t stats_words = sizeof(stats_snapshot) / 8;

  // Written by the host when it creates the control segment; never changed afterwards.
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint32_t size;  // sizeof(control_block)
  std::uint32_t padding[13];

  alignas(64) std::atomic<std::uint64_t> heartbeat;  // bumped by the owning process
  alignas(64) std::atomic<std::uint64_t> stats_sequence;
  std::atomic<std::uint64_t> stats[stats_words];

  // Owner only: one increment per liveness tick.
  void beat() noexcept { heartbeat.fetch_add(1, std::memory_order_release); }

  // Owner only (single writer): publishes a complete snapshot.
  void publish(const stats_snapshot& snapshot) noexcept;

  // Anyone: a consistent copy. Errors: "writer_stalled" (the sequence stayed odd or kept moving
  // for every one of `max_tries` attempts, e.g. the writer died mid-publish), "bad_block".
  result<stats_snapshot> read(unsigned max_tries = 1000) const noexcept;

  bool valid_header() const noexcept {
    return magic == control_block_magic && version == control_block_version &&
           size == sizeof(control_block);
  }
};
static_assert(std::is_standard_layout_v<control_block>);
static_assert(sizeof(control_block) == 576, "control_block layout is frozen; bump the version");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Stamps magic, version and size and zeroes the rest; host only, before publishing the segment.
void initialise_control_block(control_block& block) noexcept;

}  // namespace orch::ipc
