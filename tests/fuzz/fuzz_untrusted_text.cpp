// Fuzzes the untrusted-text functions: whatever bytes come in, valid_utf8() and printable() give
// text that nlohmann::json dumps (its strict UTF-8 check), printable() leaves no control byte,
// and both leave text that needs no repair unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/support/untrusted_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string valid = orch::valid_utf8(text);
  const std::string shown = orch::printable(text);
  if (!orch::is_valid_utf8(valid) || !orch::is_valid_utf8(shown)) __builtin_trap();
  if (!orch::is_printable(shown)) __builtin_trap();
  if (orch::is_valid_utf8(text) != (valid == text)) __builtin_trap();
  if (orch::is_printable(text) != (shown == text)) __builtin_trap();
  if (orch::valid_utf8(valid) != valid || orch::printable(shown) != shown) __builtin_trap();
  for (const char c : shown) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\t') || b == 0x7f) __builtin_trap();
  }
  try {
    (void)nlohmann::json(valid).dump();
    (void)nlohmann::json(shown).dump();
  } catch (const nlohmann::json::exception&) {
    __builtin_trap();
  }
  return 0;
}
