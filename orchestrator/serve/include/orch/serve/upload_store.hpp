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

#include <string>
#include <string_view>

#include "orch/support/result.hpp"

namespace orch::orchestrator {

// Writes `data` as the file `name` (a plain_file_name) of the directory `dir` (a descriptor).
// Returns the name it was stored under. Errors: bad_path (with `overwrite`, a directory holds
// the name), file_io_failed (the disk is full, the directory is not writable, ...).
result<std::string> store_upload(int dir, const std::string& name, std::string_view data,
                                 bool overwrite);

// ComfyUI's `stem (n).ext` for the n-th other name of `name` (os.path.splitext's split: the last
// '.' that is not leading).
std::string numbered_name(const std::string& name, unsigned n);

}  // namespace orch::orchestrator
