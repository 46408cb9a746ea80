// confined_path: a file or directory inside one root directory (serve's input, output or temp
// directory), reached by a file name and a subfolder that a client sent (`GET /view`,
// `POST /upload/image`), such that nothing outside the root is ever read or written.
//
// The text is checked first: absolute paths, NUL bytes and `..` components are refused
// (`bad_path`) before anything is opened. Then the path is walked one component at a time from
// an open descriptor of the root, with openat(O_NOFOLLOW | O_DIRECTORY) for each subfolder and
// openat(O_NOFOLLOW) for the file, and the caller works on the descriptors it gets back, never on
// a path string again. So every symlink under the root is refused (`symlink_refused`), one that
// points back inside included: telling an inside target from an outside one means resolving it,
// and whatever is resolved by name can be swapped (a directory for a symlink) between the check
// and the use. Walking by descriptor leaves nothing to swap: each step opens what the previous
// step's descriptor holds, and no later step looks the path up again. The root itself may be a
// symlink: it is the deployment's configuration, not the client's.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// The components of a relative path a client sent, `.` and empty ones (`a//b`) dropped; no
// component is `..` and none holds a '/' or a NUL. Empty text has no components. Errors: bad_path
// (an absolute path, a NUL byte, a `..` component, more than max_relative_path_bytes, a
// component over 255 bytes, more than max_relative_path_depth components).
inline constexpr std::size_t max_relative_path_bytes = 1024;
inline constexpr std::size_t max_relative_path_depth = 16;
result<std::vector<std::string>> relative_components(std::string_view text);

// `name` as one file name: not empty, not `.` or `..`, no '/', no NUL. Errors: bad_path.
status plain_file_name(std::string_view name);

// The directory `root/components...`, opened (O_RDONLY | O_DIRECTORY) without following any
// symlink under root. With `create`, missing components are made (mode 0755), as ComfyUI makes
// an upload's subfolder. Errors: directory_unusable (root cannot be opened), not_found (a
// component is missing, or is not a directory), symlink_refused (a component is a symlink),
// file_io_failed (mkdir or open failed otherwise).
result<ipc::unique_fd> open_confined_directory(const std::filesystem::path& root,
                                               const std::vector<std::string>& components,
                                               bool create);
// The same from `root`, an open directory (which it takes), for a root that was checked first.
result<ipc::unique_fd> open_confined_directory(ipc::unique_fd root,
                                               const std::vector<std::string>& components,
                                               bool create);

// The regular file `name` of the directory `dir`, opened read-only, not through a symlink, and
// without blocking on a FIFO. Errors: not_found (absent, or not a regular file),
// symlink_refused, file_io_failed.
result<ipc::unique_fd> open_confined_file(int dir, const std::string& name);

// Calls `fn` with the path (relative to `dir`, '/'-separated) and the status of each regular file
// in the open directory `dir`, and in its subdirectories when `recurse` (at most
// max_relative_path_depth deep), walked by descriptor as above: symlinks are neither followed nor
// listed, nor are hidden names (a leading '.', which ComfyUI's glob leaves out too, and which an
// upload's temporary file has). In no set order.
void for_each_confined_file(int dir, bool recurse,
                            const std::function<void(const std::string&, const struct stat&)>& fn);

// The bytes of the open file `fd`, if it holds at most `limit`; nullopt for more, or when a read
// fails (EINTR is retried).
std::optional<std::string> read_at_most(int fd, std::size_t limit);

}  // namespace orch::serve
