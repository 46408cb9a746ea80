// Fuzzes decode_header: any 32 bytes either fail with a typed error or decode to a header that
// encodes back to exactly the same bytes (there is one wire form per header).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "orch/ipc/frame.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace orch::ipc;
  if (size < frame_header_size + 4) return 0;
  std::uint32_t cap = 0;
  std::memcpy(&cap, data, 4);
  header_bytes in{};
  std::memcpy(in.data(), data + 4, frame_header_size);
  auto header = decode_header(in, cap);
  if (!header.ok()) {
    if (header.err().code.empty()) __builtin_trap();
    return 0;
  }
  if (header->body_length > cap) __builtin_trap();
  if (encode_header(*header) != in) __builtin_trap();
  return 0;
}
