// RFC 4648 base64, for bytes that must cross a text-only boundary: the host library's events are
// JSON text (host.h), and a pack's binary message or preview goes to ComfyUI's process in one.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace orch {

inline std::string base64(std::span<const std::uint8_t> bytes) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    for (int shift : {18, 12, 6, 0}) out += alphabet[(v >> shift) & 63];
  }
  if (const std::size_t left = bytes.size() - i; left > 0) {
    const std::uint32_t v = (bytes[i] << 16) | (left == 2 ? bytes[i + 1] << 8 : 0);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += left == 2 ? alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace orch
