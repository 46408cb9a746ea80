#include "orch/ipc/frame.hpp"

#include <string>

namespace orch::ipc {
namespace {

// Explicit little-endian stores and loads: the layout does not depend on the host's byte order
// or on struct padding.
template <typename T>
void put(header_bytes& out, std::size_t offset, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[offset + i] =
        static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xffu);
  }
}

template <typename T>
T get(std::span<const std::byte, frame_header_size> in, std::size_t offset) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<std::uint64_t>(in[offset + i]) << (8 * i);
  }
  return static_cast<T>(value);
}

}  // namespace

header_bytes encode_header(const frame_header& h) noexcept {
  header_bytes out{};
  put<std::uint32_t>(out, 0, h.magic);
  put<std::uint16_t>(out, 4, h.version);
  put<std::uint16_t>(out, 6, h.type);
  put<std::uint16_t>(out, 8, h.flags);
  put<std::uint16_t>(out, 10, 0);
  put<std::uint32_t>(out, 12, h.body_length);
  put<std::uint64_t>(out, 16, h.request_id);
  put<std::uint32_t>(out, 24, h.generation);
  put<std::uint32_t>(out, 28, 0);
  return out;
}

result<frame_header> decode_header(std::span<const std::byte, frame_header_size> in,
                                   std::uint32_t max_body) {
  frame_header h;
  h.magic = get<std::uint32_t>(in, 0);
  if (h.magic != frame_magic) return error{frame_errc::bad_magic, "frame magic is wrong"};
  h.version = get<std::uint16_t>(in, 4);
  if (h.version != protocol_version) {
    return error{frame_errc::bad_version, "frame protocol version " + std::to_string(h.version) +
                                              ", this build speaks " +
                                              std::to_string(protocol_version)};
  }
  h.type = get<std::uint16_t>(in, 6);
  h.flags = get<std::uint16_t>(in, 8);
  if ((h.flags & ~frame_flags::known) != 0 ||
      ((h.flags & frame_flags::error) != 0 && (h.flags & frame_flags::response) == 0)) {
    return error{frame_errc::bad_flags, "frame flags " + std::to_string(h.flags) + " are unknown"};
  }
  if (get<std::uint16_t>(in, 10) != 0 || get<std::uint32_t>(in, 28) != 0) {
    return error{frame_errc::bad_reserved, "frame reserved fields are not zero"};
  }
  h.body_length = get<std::uint32_t>(in, 12);
  if (h.body_length > max_body) {
    return error{frame_errc::oversize, "frame body of " + std::to_string(h.body_length) +
                                           " bytes is over the cap of " + std::to_string(max_body)};
  }
  h.request_id = get<std::uint64_t>(in, 16);
  h.generation = get<std::uint32_t>(in, 24);
  return h;
}

}  // namespace orch::ipc
