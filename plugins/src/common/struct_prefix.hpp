// Filling a caller's struct_size-prefixed struct (stats, infos, counters; docs/plugin-abi.md,
// "Rules"). The caller's struct may be an older, shorter prefix of ours or a newer, longer one:
// we write the fields both know and leave the rest, and the caller's struct_size, untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace orch::plugin_detail {

// Copies as much of `value` as the caller's struct holds (at most sizeof(T) bytes) into *out,
// keeping out->struct_size. The caller has checked, with ORCH_HAS_FIELD, that *out holds at
// least the fields of the struct's first version.
template <typename T>
void write_prefix(T* out, const T& value) noexcept {
  const uint32_t size = out->struct_size;
  std::memcpy(out, &value, size < sizeof(T) ? size : sizeof(T));
  out->struct_size = size;
}

}  // namespace orch::plugin_detail
