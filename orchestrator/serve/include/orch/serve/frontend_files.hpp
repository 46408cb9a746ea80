// frontend_files: ComfyUI's web root (docs/serve.md, "The frontend"), the built files of
// ComfyUI's official frontend (the comfyui-frontend-package wheel's static/ directory, or
// --front-end-root's). GET / is its index.html, sent with Cache-Control: no-cache (and Pragma
// and Expires) as ComfyUI sends it, so a frontend updated in place is seen at the next load;
// any other GET path is a
// file under the root with its MIME type (scripts as JavaScript, which a browser requires of a
// module), reached as confined_path walks it: no `..`, no symlink, nothing outside the root.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/unique_fd.hpp"
#include "orch/serve/extension_web_dirs.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::serve {

// The Content-Type of a frontend file, by its extension (case-insensitive): what a browser needs
// to run and draw the page (.js and .mjs as JavaScript, .css, .html, .svg, fonts, .wasm), else
// content_type_of's.
std::string frontend_content_type(std::string_view filename);

// The file `components` names under the open directory `root`, walked as confined_path walks it
// (no symlink, no "..", nothing outside `root`), as a reply with frontend_content_type's type;
// nullopt when it is not there to serve. The frontend's files and the workflow templates use it.
std::optional<http_reply> confined_file_reply(ipc::unique_fd root,
                                              std::vector<std::string> components);

class frontend_files {
 public:
  // `root`: the frontend's directory (holding index.html); nullopt when serve has none.
  // `packs`: the packs' web directories, served under /extensions/<name>/.
  explicit frontend_files(std::optional<std::filesystem::path> root,
                          std::vector<extension_web_dir> packs = {})
      : root_(std::move(root)), packs_(std::move(packs)) {}

  // The answer to GET `path` (percent-decoded), or nullopt where no such file is served.
  // Without a root, GET / answers a page that says how to get the frontend.
  std::optional<http_reply> get(const std::string& path) const;
  // GET /extensions: the URL of every .js file under the root's extensions/ (the frontend's
  // own core extensions), then under each pack's web directory, as ComfyUI lists them.
  nlohmann::json extensions() const;
  const std::optional<std::filesystem::path>& root() const { return root_; }

 private:
  std::optional<std::filesystem::path> root_;
  std::vector<extension_web_dir> packs_;
};

}  // namespace orch::serve
