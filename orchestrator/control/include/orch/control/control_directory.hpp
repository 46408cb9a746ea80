// control_directory: where a running `serve` can be found by the CLI (docs/cli.md, "The control
// socket"). Each server puts a Unix socket `<pid>.sock` and a registration `<pid>.json` (its
// deployment, socket, HTTP address and start time) in one per-user directory:
// $XDG_RUNTIME_DIR/comfy-orch/, or /tmp/comfy-orch-<uid>/ without one or where a socket's path
// there would not fit in a Unix socket's address (108 bytes). The directory is the first
// guard: mode 0700 and owned by this user, and one that is not (a symlink, another user's, or
// open to others) is refused rather than used, since another user who owns it could replace a
// socket with their own. Each connection's peer uid is the second (control_socket.hpp).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::control {

// The directory this user's servers use; nothing is created.
std::filesystem::path control_directory_path();

// Creates the directory (mode 0700) when absent, then checks it is a real directory, owned by
// this user, with no access for group or others. Errors: "directory_unusable", naming the path,
// what is wrong with it and the fix.
result<std::filesystem::path> open_control_directory();

struct server_registration {
  pid_t pid = 0;
  std::string deployment;  // the deployment file, absolute and canonical
  std::string socket;      // the control socket's path
  std::string http;        // "http://ADDR:PORT", empty until serve listens
  std::string version;     // comfy-orch's
  long long started_unix_ms = 0;
  bool answering = false;  // read back only: its socket accepts a connection
};

// Writes `<dir>/<pid>.json` whole (a temporary file renamed into place, so a reader never sees
// half of one). Errors: "file_io_failed".
status write_registration(const std::filesystem::path& dir, const server_registration& r);
// Removes this process's registration and socket; for the server on its way out.
void remove_registration(const std::filesystem::path& dir, pid_t pid);

// Every registration in this user's directory whose server still runs, sorted by pid, with
// `answering` filled in. A file that is not a registration is skipped; the files of a server
// whose pid is gone (killed, so it could not remove them) are removed. Errors: those of
// open_control_directory.
result<std::vector<server_registration>> list_registrations();

}  // namespace orch::control
