// Byte sizes and durations as operators write them in TOML: "8GiB", "512MiB", "1.5GB", 1048576;
// "250ms", "10s", "2m", 5.0.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace orch::manifests {

// Parses "<number><unit>" with unit B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
// (powers of 1000). Fractions are allowed ("1.5GiB"). Returns nullopt for anything else,
// including negative values and results that overflow 64 bits.
std::optional<std::uint64_t> parse_size(std::string_view text);
// True when `text` is a well-formed size that does not fit in 64 bits ("99999999999TiB"), so
// the error can say so instead of "is not a size".
bool size_overflows(std::string_view text);

// Parses "<number><unit>" with unit ms, s, m or h. Returns nullopt for anything else.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// "8 GiB", "512 MiB", "17 B": the largest binary unit that keeps the value >= 1, two decimals at
// most. For tables and messages.
std::string format_size(std::uint64_t bytes);

}  // namespace orch::manifests
