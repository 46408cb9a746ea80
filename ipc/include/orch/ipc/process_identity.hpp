// process_identity: a pid plus its start time (field 22 of /proc/<pid>/stat, clock ticks since
// boot). A pid alone is reused by the kernel; the pair is not (docs/references.md, anchors
// §8.2.1), so the host never reclaims a live process's slot because a dead one's pid came back.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "orch/support/result.hpp"

namespace orch::ipc {

struct process_identity {
  std::uint64_t pid = 0;
  std::uint64_t start_time = 0;
  friend bool operator==(const process_identity&, const process_identity&) = default;
};

// Parses the text of /proc/<pid>/stat. The command name (field 2) may hold spaces and ')', so
// fields are counted from the last ')'. Errors: "bad_stat".
struct stat_fields {
  char state = '?';
  std::uint64_t start_time = 0;
};
result<stat_fields> parse_proc_stat(std::string_view text);

// Reads the identity of `pid` now. Errors: "no_such_process", "bad_stat".
result<process_identity> read_process_identity(pid_t pid,
                                               const std::filesystem::path& proc_root = "/proc");

// True while a process with this pid and start time exists and is not a zombie.
bool is_alive(const process_identity& id, const std::filesystem::path& proc_root = "/proc");

}  // namespace orch::ipc
