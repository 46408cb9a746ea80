// handshake: the settings the host answers a worker's hello with (docs/protocol.md, "Handshake").
// One type for both sides: the supervisor fills it and encodes it, the worker decodes and checks
// it. It was once written by hand twice (a field renamed on one side read as "missing" on the
// other); now a field added here is sent and read in the same change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::ipc {

// The first byte sent with the segments' fds at spawn (docs/protocol.md): which optional fds
// are among them. The second byte is the number of pool segments.
namespace segments_flags {
inline constexpr std::uint8_t sim = 1u << 0;   // the sim device's memfd, after the slot's
inline constexpr std::uint8_t lane = 1u << 1;  // the call lane's socket (lane_socket.hpp), last
}  // namespace segments_flags

// The host's memory settings that shape a worker's plugins (applied by what its manager and
// protocol level can express: docs/memory-semantics.md).
struct memory_settings {
  std::uint32_t streams = 0;
  std::uint64_t page_size = 0;
  std::uint64_t reserve_vram = 0;                // the pager's extra headroom (L3+)
  std::uint64_t simple_headroom = 256ull << 20;  // L3+
  std::uint32_t pressure_source = 0;             // L4+
  bool pinned_memory = true;
};

struct pool_segment_info {
  std::uint32_t segment = 0;
  std::uint64_t total_size = 0;
};

struct handshake_settings {
  std::uint32_t slot = 0;        // the worker's budget slot in the control segment
  std::uint32_t generation = 0;  // which start of this env the worker is
  std::string device = "cpu";
  int ordinal = 0;
  std::string backend_plugin;    // the device's backend; empty: none (cpu without its plugin)
                                 // (the pool is registered with it when pinned_memory is on)
  std::string host_manager;      // "pager" or "ledger": what the host itself runs
  std::uint32_t level = 0;       // the level the pager runs at (the host's, or the adapter's)
  std::string pager_plugin;      // path, empty: no pager plugin serves this backend
  std::string ledger_plugin;     // path, empty: none
  std::string allocator_plugin;  // path, empty: none
  std::string no_pager_reason;   // why pager_plugin is empty ("no pager plugin for backend X")
  memory_settings memory;
  std::uint32_t heartbeat_ms = 1000;
  std::vector<pool_segment_info> pool_segments;  // in the order the fds were sent
};

nlohmann::json to_json(const handshake_settings& s);
// Every field present with its type, or handshake_errc::bad_handshake naming the first that is
// not. A host is trusted more than a worker, but a version skew must fail here, clearly.
result<handshake_settings> handshake_from_json(const nlohmann::json& j);

}  // namespace orch::ipc
