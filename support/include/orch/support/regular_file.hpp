// regular_file: reads a file that a user named on the command line, refusing what is not a
// regular file (a FIFO would block, /dev/zero and /dev/urandom never end) and what is larger
// than the caller's cap, before reading it. `--prompt /dev/zero` once read 2 GB before failing.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "orch/support/result.hpp"

namespace orch {

// In support's own namespace, as every library's names are (docs/architecture.md, "Libraries").
namespace support::file_errc {
inline constexpr const char* not_found = "not_found";
inline constexpr const char* not_regular = "not_a_regular_file";
inline constexpr const char* too_large = "too_large";
inline constexpr const char* unreadable = "unreadable";
}  // namespace support::file_errc

// The whole content of `file`, at most `max_bytes` long. The check is made on the opened file
// (fstat), so a path swapped after a stat cannot slip a device in, and the read stops at the cap
// even if the file grows meanwhile. Errors (support::file_errc) carry a message that names the
// file, the cause and the fix. Never throws but bad_alloc.
result<std::string> read_regular_file(const std::filesystem::path& file, std::size_t max_bytes);

}  // namespace orch
