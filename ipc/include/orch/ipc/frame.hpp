// frame: the fixed 32-byte little-endian header in front of every message on a channel
// (docs/protocol.md; docs/references.md, anchors §8.4.1). It is decoded and validated before
// a single body byte is used: a wrong magic, version, reserved field or a length over the cap is
// a protocol violation that closes the connection (Ray's cookie check).
//
//   offset size field
//   0      4    magic            "ORCM"
//   4      2    version          protocol_version
//   6      2    type             message_type (message.hpp)
//   8      2    flags            frame_flags
//   10     2    reserved         must be 0
//   12     4    body_length      <= the receiver's cap
//   16     8    request_id       correlates a response with its request; 0 for notifications
//   24     4    generation       the worker generation the sender belongs to
//   28     4    reserved2        must be 0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "orch/ipc/errc.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

inline constexpr std::uint32_t frame_magic = 0x4d43524fu;  // bytes "ORCM" on the wire
inline constexpr std::uint16_t protocol_version = 1;
inline constexpr std::size_t frame_header_size = 32;
// Bodies are small control messages: bulk data travels as descriptors, never in the socket.
inline constexpr std::uint32_t default_max_body = 1u << 20;

namespace frame_flags {
inline constexpr std::uint16_t response = 1u << 0;  // answers request_id
inline constexpr std::uint16_t error = 1u << 1;     // with response: the body is an error
inline constexpr std::uint16_t known = response | error;
}  // namespace frame_flags

struct frame_header {
  std::uint32_t magic = frame_magic;
  std::uint16_t version = protocol_version;
  std::uint16_t type = 0;
  std::uint16_t flags = 0;
  std::uint32_t body_length = 0;
  std::uint64_t request_id = 0;
  std::uint32_t generation = 0;
  friend bool operator==(const frame_header&, const frame_header&) = default;
};

using header_bytes = std::array<std::byte, frame_header_size>;

header_bytes encode_header(const frame_header& header) noexcept;

// Validates and decodes; `max_body` is the receiver's cap. Pure; the fuzz target drives it.
result<frame_header> decode_header(std::span<const std::byte, frame_header_size> bytes,
                                   std::uint32_t max_body = default_max_body);

}  // namespace orch::ipc
