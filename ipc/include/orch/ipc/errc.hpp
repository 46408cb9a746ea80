// The ipc layer's error codes: every orch::error this layer returns carries one of these, and
// callers compare against them, never against text (docs/errors.md). The codes are strings
// because they cross process boundaries and appear in `--json` output unchanged.
#pragma once

namespace orch::ipc {

namespace channel_errc {
inline constexpr const char* peer_lost = "peer_lost";
inline constexpr const char* deadline_exceeded = "deadline_exceeded";
inline constexpr const char* queue_full = "queue_full";
inline constexpr const char* body_too_large = "body_too_large";
inline constexpr const char* closed = "closed";  // this side closed the channel
}  // namespace channel_errc

// A call lane (lane_socket.hpp): a frame the lane's protocol has no place for.
namespace lane_errc {
inline constexpr const char* wrong_generation = "wrong_generation";
inline constexpr const char* unexpected_frame = "unexpected_frame";
inline constexpr const char* bad_box = "bad_box";  // a box whose length is not one frame's
}  // namespace lane_errc

namespace frame_errc {
inline constexpr const char* bad_magic = "bad_magic";
inline constexpr const char* bad_version = "bad_version";
inline constexpr const char* bad_flags = "bad_flags";
inline constexpr const char* bad_reserved = "bad_reserved";
inline constexpr const char* oversize = "oversize";
}  // namespace frame_errc

// A message body (requests and responses alike: message.hpp).
namespace body_errc {
inline constexpr const char* not_cbor = "bad_cbor";
inline constexpr const char* too_deep = "too_deep";
inline constexpr const char* not_a_map = "not_a_map";
inline constexpr const char* missing_field = "missing_field";
inline constexpr const char* bad_field = "bad_field";
inline constexpr const char* unknown_type = "unknown_type";
}  // namespace body_errc

namespace descriptor_errc {
inline constexpr const char* unknown_segment = "unknown_segment";
inline constexpr const char* out_of_bounds = "out_of_bounds";
inline constexpr const char* misaligned = "misaligned";
inline constexpr const char* stale_generation = "stale_generation";
inline constexpr const char* empty = "empty_descriptor";
}  // namespace descriptor_errc

namespace tensor_errc {
inline constexpr const char* unknown_dtype = "unknown_dtype";
inline constexpr const char* bad_rank = "bad_rank";        // more than max_tensor_dims
inline constexpr const char* bad_shape = "bad_shape";      // a negative dim
inline constexpr const char* bad_strides = "bad_strides";  // not one per dim, or negative
inline constexpr const char* too_large = "too_large";      // the extent does not fit 64 bits
inline constexpr const char* out_of_bounds = "tensor_out_of_bounds";  // reaches past the buffer
}  // namespace tensor_errc

// Passing descriptors over a Unix socket (fd_passing.hpp).
namespace fd_errc {
inline constexpr const char* invalid_argument = "invalid_argument";
inline constexpr const char* send_failed = "send_failed";
inline constexpr const char* recv_failed = "recv_failed";
inline constexpr const char* peer_closed = "peer_closed";
inline constexpr const char* too_many_fds = "too_many_fds";
}  // namespace fd_errc

// Shared-memory segments, the pool, its segment table and leases.
namespace shm_errc {
inline constexpr const char* invalid_argument = "invalid_argument";
inline constexpr const char* memfd_failed = "memfd_failed";
inline constexpr const char* map_failed = "map_failed";
inline constexpr const char* not_sealed = "not_sealed";
inline constexpr const char* seal_refused = "seal_refused";  // the kernel lacks the seal
inline constexpr const char* seal_failed = "seal_failed";
inline constexpr const char* stat_failed = "stat_failed";
inline constexpr const char* size_mismatch = "size_mismatch";
inline constexpr const char* bad_segment = "bad_segment";
inline constexpr const char* duplicate_segment = "duplicate_segment";
inline constexpr const char* segment_mismatch = "segment_mismatch";
inline constexpr const char* too_large = "too_large";
inline constexpr const char* pool_exhausted = "pool_exhausted";
inline constexpr const char* unknown_lease = "unknown_lease";
inline constexpr const char* not_held = "not_held";
inline constexpr const char* not_owner = "not_owner";
inline constexpr const char* in_limbo = "in_limbo";
inline constexpr const char* pin_failed = "pin_failed";
}  // namespace shm_errc

// The pinned budget: the control segment's slots and blocks, and the machine-wide ledger.
namespace budget_errc {
inline constexpr const char* invalid_argument = "invalid_argument";
inline constexpr const char* bad_segment = "bad_segment";
inline constexpr const char* bad_slot = "bad_slot";
inline constexpr const char* bad_block = "bad_block";
inline constexpr const char* writer_stalled = "writer_stalled";
inline constexpr const char* no_free_slot = "no_free_slot";
inline constexpr const char* budget_exceeded = "budget_exceeded";
inline constexpr const char* bad_ledger = "bad_ledger";
inline constexpr const char* ledger_failed = "ledger_failed";
inline constexpr const char* machine_budget_exceeded = "machine_budget_exceeded";
}  // namespace budget_errc

// The host's answer to a worker's hello (handshake.hpp).
namespace handshake_errc {
inline constexpr const char* bad_handshake = "bad_handshake";  // settings the worker cannot read
inline constexpr const char* bad_hello = "bad_hello";          // token, pid or protocol mismatch
inline constexpr const char* out_of_order = "unexpected";      // a handshake message after it ended
}  // namespace handshake_errc

// Reading another process's /proc entries and the machine's memory.
namespace proc_errc {
inline constexpr const char* bad_stat = "bad_stat";
inline constexpr const char* no_such_process = "no_such_process";
inline constexpr const char* no_meminfo = "no_meminfo";
}  // namespace proc_errc

// The `type` of a failed node call's error, as the worker reports it and ComfyUI's
// exception_type shows it (docs/protocol.md).
namespace node_error_type {
inline constexpr const char* missing_node_type = "missing_node_type";
inline constexpr const char* invalid_input = "invalid_input";
inline constexpr const char* interrupted = "interrupted";
inline constexpr const char* node_error = "node_error";        // the node failed, no type given
inline constexpr const char* out_of_memory = "out_of_memory";  // carries `required` bytes
}  // namespace node_error_type

}  // namespace orch::ipc
