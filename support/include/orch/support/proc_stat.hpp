// proc_stat: the two fields of /proc/<pid>/stat that identify a live process: its state
// (field 3) and its start time in clock ticks since boot (field 22). A pid alone is reused; a pid
// with its start time is not. The one parser for the host (ipc/process_identity.hpp) and the sim
// device's process slots, so it is header-only, allocates nothing and never throws: the sim plugin
// calls it inside a shared-memory protocol that a process killed at any instruction must survive.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace orch {

struct proc_stat_fields {
  char state = '?';
  std::uint64_t start_time = 0;
};

// Parses the text of /proc/<pid>/stat into `out`; false when it has no state and start time. The
// command name (field 2) may hold spaces and ')', so fields are counted from the last ')'.
inline bool parse_proc_stat_line(std::string_view text, proc_stat_fields& out) noexcept {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return false;
  std::size_t pos = close + 1;
  for (int field = 3; field <= 22; ++field) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    std::size_t end = pos;
    while (end < text.size() && text[end] != ' ' && text[end] != '\n') ++end;
    if (end == pos) return false;
    if (field == 3) out.state = text[pos];
    if (field == 22) {
      const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, out.start_time);
      return ec == std::errc{} && ptr == text.data() + end;
    }
    pos = end;
  }
  return false;
}

}  // namespace orch
