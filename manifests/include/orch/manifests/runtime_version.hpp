// A device runtime's version, "MAJOR.MINOR" (CUDA driver 12.8, HIP 7.1, the sim's configured
// one). It is what [memory.runtime_floor] is compared with: the native counterpart of ComfyUI's
// "torch below 2.8" gate (docs/memory-semantics.md). A string in TOML, since a float would read
// "12.10" as 12.1.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace orch::manifests {

struct runtime_version {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;

  std::string to_string() const;  // "12.8"
  friend auto operator<=>(const runtime_version&, const runtime_version&) = default;
};

// "12", "12.8": decimal digits, each part at most 65535 (a version packs into 32 bits on sim).
std::optional<runtime_version> parse_runtime_version(std::string_view text);

}  // namespace orch::manifests
