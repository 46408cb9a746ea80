// serve_files: ComfyUI's `GET /view`, `POST /upload/image` and `POST /upload/mask`
// (docs/serve.md; server.py's shapes), over the deployment's input and output directories and a
// temp directory, and nothing outside them (confined_path.hpp).
//
// The temp and user directories are ComfyUI's: `temp/` and `user/` in the ComfyUI root when
// [comfyui] root is set, else beside the deployment file, where input/ and output/ default to
// (server.output_directory does not move them, as ComfyUI's --output-directory does not).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "orch/manifests/deployment.hpp"
#include "orch/serve/multipart_form.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

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

  // GET /view?filename=&subfolder=&type=output|input|temp: the file's bytes, or with preview=
  // or channel= the image re-encoded as server.py re-encodes it (view_image.hpp; 500 for a file
  // that is no PNG, JPEG or WebP image).
  http_reply view(const http_request& req) const;
  // POST /upload/image, multipart/form-data with image (a file), overwrite, subfolder, type
  // (input unless given): {"name", "subfolder", "type"}.
  http_reply upload_image(const http_request& req) const;
  // POST /upload/mask: as /upload/image, and original_ref (JSON {filename, subfolder, type},
  // type output unless given) names an image whose pixels are saved under the upload's name
  // with the uploaded image's alpha (masked_image.hpp). As server.py: 500 for a missing or
  // malformed original_ref, an original or a mask that is no image, sizes that differ; an
  // original that is not there (or not reachable) writes nothing and is still answered 200.
  http_reply upload_mask(const http_request& req) const;

 private:
  struct upload_form;
  struct original_image;
  const std::filesystem::path* directory(const std::string& type) const;
  // Reads an upload's form and opens its subfolder; the refusal when it cannot.
  std::optional<http_reply> read_upload(const http_request& req, upload_form& form) const;
  static http_reply uploaded(const upload_form& form, const std::string& name);
  original_image original_of(const std::vector<form_part>& parts) const;
  file_directories dirs_;
};

}  // namespace orch::serve
