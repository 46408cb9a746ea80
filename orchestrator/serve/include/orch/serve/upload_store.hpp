// upload_store: an uploaded file written into a directory as ComfyUI's `POST /upload/image`
// does, without ever showing a half-written file. The bytes go to a new temporary file in the
// same directory (`.upload-<random>.tmp`, O_EXCL | O_NOFOLLOW), which is then renamed into
// place, so a reader sees the old file or the whole new one. The rename acts on the final name
// itself: a symlink there is replaced (overwrite) or counted as taken, never followed.
//
// Without `overwrite`, a taken name is kept and the upload gets the next free `stem (N).ext`
// (ComfyUI's rule), unless the file under a taken name holds exactly the uploaded bytes: then
// that name is answered and nothing is written (ComfyUI compares hashes for the same purpose).
// The free name is claimed with renameat2(RENAME_NOREPLACE) (link(2) where the file system
// lacks it), so a file that appears meanwhile is never replaced.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// What store_upload makes of a taken name whose file holds exactly the bytes it is given: the
// upload's name, with nothing written (ComfyUI's hash check), or a name taken like any other
// (for /upload/mask, which writes other bytes than it received, and looks for the received ones
// first with stored_duplicate).
enum class same_bytes { answer_that_name, pass_over };

// Writes `data` as the file `name` (a plain_file_name) of the directory `dir` (a descriptor).
// Returns the name it was stored under. Errors: bad_path (with `overwrite`, a directory holds
// the name), file_io_failed (the disk is full, the directory is not writable, ...).
result<std::string> store_upload(int dir, const std::string& name, std::string_view data,
                                 bool overwrite,
                                 same_bytes duplicates = same_bytes::answer_that_name);

// The name ComfyUI's upload loop stops at without writing anything for `data` (not
// overwriting): the first of `name`, `stem (1).ext`, ... whose file holds exactly `data`,
// looked for among the taken names before the first free one; nullopt when a free name comes
// first. Errors: file_io_failed.
result<std::optional<std::string>> stored_duplicate(int dir, const std::string& name,
                                                    std::string_view data);

// A new empty file of `dir` under a hidden temporary name (`.upload-<random>.tmp`, made with
// O_EXCL | O_NOFOLLOW, mode 0644), for a writer that then renames it into place as store_upload
// does (the gateway's copies of its hosts' outputs): its name and its descriptor, open for
// writing. Errors: file_io_failed.
result<std::pair<std::string, ipc::unique_fd>> create_temporary_file(int dir);

// Puts the written temporary file `temp` of `dir` in place as store_upload does without
// `overwrite`: under `name` when it is free, else under the name of the first of `name`,
// `stem (1).ext`, ... whose file holds the same bytes (the temporary is removed), else under the
// first free one (claimed without replacing a file that appears meanwhile). The temporary is gone
// afterwards in every case. The name it is stored under. Errors: file_io_failed.
result<std::string> place_temporary(int dir, const std::string& temp, const std::string& name);

// ComfyUI's `stem (n).ext` for the n-th other name of `name` (os.path.splitext's split: the last
// '.' that is not leading).
std::string numbered_name(const std::string& name, unsigned n);

}  // namespace orch::serve
