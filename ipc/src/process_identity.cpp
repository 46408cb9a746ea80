#include "orch/ipc/process_identity.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/support/proc_stat.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace orch::ipc {

result<stat_fields> parse_proc_stat(std::string_view text) {
  proc_stat_fields fields;
  if (!parse_proc_stat_line(text, fields)) {
    return error{proc_errc::bad_stat,
                 "the stat line has no state and numeric start time (fields 3 and 22)"};
  }
  return stat_fields{fields.state, fields.start_time};
}

result<process_identity> read_process_identity(pid_t pid, const std::filesystem::path& proc_root) {
  std::ifstream in(proc_root / std::to_string(pid) / "stat");
  if (!in) return error{proc_errc::no_such_process, "no process " + std::to_string(pid)};
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
