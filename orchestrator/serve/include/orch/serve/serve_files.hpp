// serve_files: ComfyUI's `GET /view` and `POST /upload/image` (docs/serve.md; server.py's
// shapes), over the deployment's input and output directories and a temp directory, and
// nothing outside them (confined_path.hpp).
//
// The temp and user directories are ComfyUI's: `temp/` and `user/` in the ComfyUI root when
// [comfyui] root is set, else beside the deployment file, where input/ and output/ default to
// (server.output_directory does not move them, as ComfyUI's --output-directory does not).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "orch/manifests/deployment.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/support/result.hpp"

namespace orch::orchestrator {

struct file_directories {
  std::filesystem::path input;
  std::filesystem::path output;
  std::filesystem::path temp;
  std::filesystem::path user;  // ComfyUI's user directory, beside temp (user_data.hpp)
};

// The deployment's directories, absolute.
file_directories file_directories_of(const manifests::deployment& d);

// Makes each directory that is missing, and its missing parents, with mode 0755 (as ComfyUI
// makes its own at start). Errors: directory_unusable (which directory, and why).
status create_file_directories(const file_directories& dirs);

// The Content-Type `/view` answers for a file name, by its extension (case-insensitive);
// application/octet-stream for one it does not know.
std::string content_type_of(std::string_view filename);

class file_routes {
 public:
  explicit file_routes(file_directories dirs) : dirs_(std::move(dirs)) {}

  // GET /view?filename=&subfolder=&type=output|input|temp: the file's bytes. The preview= and
  // channel= options (a re-encoded or single-channel image) are ignored: the file is answered as
  // it is.
  http_reply view(const http_request& req) const;
  // POST /upload/image, multipart/form-data with image (a file), overwrite, subfolder, type
  // (input unless given): {"name", "subfolder", "type"}.
  http_reply upload_image(const http_request& req) const;

 private:
  const std::filesystem::path* directory(const std::string& type) const;
  file_directories dirs_;
};

}  // namespace orch::orchestrator
