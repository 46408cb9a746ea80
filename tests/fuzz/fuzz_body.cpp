// Fuzzes decode_body: no input may crash it or recurse without bound; a body it accepts encodes
// and decodes again to the same value, encodes as JSON text (what the host's event sinks, logs
// and --json lines do with a worker's text: a CBOR string of invalid UTF-8 once made that throw
// type_error.316 and end the host), and accepted lease messages carry a usable descriptor.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "orch/ipc/frame.hpp"
#include "orch/ipc/message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace orch::ipc;
  if (size < 2) return 0;
  // First byte picks the type (0..15 covers the catalogue and unknown values), second the flags.
  const std::uint16_t type = data[0] & 0x0f;
  const std::uint16_t flags = data[1] & frame_flags::known;
  const std::span<const std::uint8_t> body(data + 2, size - 2);
  auto decoded = decode_body(type, flags, body);
  if (!decoded.ok()) return 0;
  if (!decoded->is_object()) __builtin_trap();
  auto again = decode_body(type, flags, encode_body(*decoded));
  if (!again.ok() || *again != *decoded) __builtin_trap();
  try {
    const std::string text = decoded->dump();  // the strict handler: throws on invalid UTF-8
    if (!json::accept(text)) __builtin_trap();
  } catch (const json::exception&) {
    __builtin_trap();
  }
  const bool lease = type == static_cast<std::uint16_t>(message_type::lease_grant) ||
                     type == static_cast<std::uint16_t>(message_type::lease_release) ||
                     type == static_cast<std::uint16_t>(message_type::lease_free);
  if (lease && (flags & frame_flags::response) == 0 &&
      !descriptor_from_json((*decoded)["descriptor"]).ok()) {
    __builtin_trap();
  }
  return 0;
}
