#include "orch/ipc/process_identity.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace orch::ipc {

result<stat_fields> parse_proc_stat(std::string_view text) {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return error{"bad_stat", "no ')' after the command name"};
  // After ") " come field 3 (state), 4, 5, ... ; start time is field 22.
  std::string_view rest = text.substr(close + 1);
  stat_fields out;
  int field = 2;
  std::size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    if (pos >= rest.size()) break;
    const std::size_t end = std::min(rest.find(' ', pos), rest.size());
    const std::string_view token = rest.substr(pos, end - pos);
    ++field;
    if (field == 3) {
      out.state = token.empty() ? '?' : token.front();
    } else if (field == 22) {
      const auto [ptr, ec] =
          std::from_chars(token.data(), token.data() + token.size(), out.start_time);
      if (ec != std::errc{} || ptr != token.data() + token.size()) {
        return error{"bad_stat", "start time field is not a number"};
      }
      return out;
    }
    pos = end;
  }
  return error{"bad_stat", "stat line has fewer than 22 fields"};
}

result<process_identity> read_process_identity(pid_t pid, const std::filesystem::path& proc_root) {
  std::ifstream in(proc_root / std::to_string(pid) / "stat");
  if (!in) return error{"no_such_process", "no process " + std::to_string(pid)};
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto fields = parse_proc_stat(buffer.str());
  if (!fields) return fields.err();
  return process_identity{static_cast<std::uint64_t>(pid), fields->start_time};
}

bool is_alive(const process_identity& id, const std::filesystem::path& proc_root) {
  std::ifstream in(proc_root / std::to_string(id.pid) / "stat");
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto fields = parse_proc_stat(buffer.str());
  // A zombie holds no memory any more: its slot may be reclaimed before it is reaped.
  return fields && fields->start_time == id.start_time && fields->state != 'Z' &&
         fields->state != 'X';
}

}  // namespace orch::ipc
