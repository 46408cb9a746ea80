// The error codes of `comfy-orch serve` (docs/errors.md). Errors that reach a user as ComfyUI's exception_type
// carry these names, so they are part of the `--json` output; a code another library also uses
// is the same word there, declared by each library that makes it.
#pragma once

namespace orch::serve::serve_errc {

// The address cannot be bound (serve_http.hpp).
inline constexpr const char* listen_failed = "listen_failed";
// A configuration no server could serve with (serve_config.hpp): a body cap past one client's
// share of its budget, a frontend directory without index.html (serve_server.hpp).
inline constexpr const char* invalid_config = "invalid_config";
// serve's files (serve_files.hpp): a multipart/form-data body that cannot be read
// (multipart_form.hpp); a file name or subfolder that is no plain relative path (empty,
// absolute, a `..` component, a NUL byte), or one that leads through a symlink
// (confined_path.hpp); an input, output or temp directory that cannot be created or opened; a
// file that cannot be read or written; an absent file.
inline constexpr const char* invalid_form = "invalid_form";
inline constexpr const char* bad_path = "bad_path";
inline constexpr const char* symlink_refused = "symlink_refused";
inline constexpr const char* directory_unusable = "directory_unusable";
inline constexpr const char* file_io_failed = "file_io_failed";
inline constexpr const char* not_found = "not_found";
// A request whose query or body a route refuses (serve_jobs.hpp): ComfyUI's 400, with its text.
inline constexpr const char* bad_request = "bad_request";
// Images (image_codec.hpp): bytes that are no PNG, JPEG or WebP image serve can read (malformed,
// truncated, another format); an image of more pixels than serve decodes; pixels an encoder
// refuses (a size past the format's, a quality out of its range); two images whose sizes must
// match and do not (/upload/mask's image and its original).
inline constexpr const char* image_unreadable = "image_unreadable";
inline constexpr const char* image_too_large = "image_too_large";
inline constexpr const char* image_unwritable = "image_unwritable";
inline constexpr const char* image_size_mismatch = "image_size_mismatch";

}  // namespace orch::serve::serve_errc
