// extension_web_dirs: each pack's web directory, the JavaScript ComfyUI's frontend loads for it
// from /extensions/<name>/ (docs/serve.md, "The frontend"), found as ComfyUI's load_custom_node
// registers it (nodes.py at a125cd84) but without running the pack: serve never imports a
// pack's top-level __init__.py, whose register_nodes() belongs to a ComfyUI process. So:
//
//   - pyproject.toml's [tool.comfy] web, named by its [project] name;
//   - and a top-level `WEB_DIRECTORY = "..."` in the pack's __init__.py, a string literal (the
//     form packs use), named by the pack's directory.
//
// Both files are read as regular files of the pack, without a symlink, at most 1 MiB. A
// directory that does not exist, or that leaves the pack's directory once its symlinks are
// resolved, is not served (ComfyUI would serve what a `..` or a link reaches; a pack's own files
// are what a pack may publish here). The directory found is the one served: if it is replaced
// while serve runs (by a symlink to `/`, which the pack's worker could make), it is no longer
// served (open_web_dir).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/ipc/unique_fd.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::serve {

struct extension_web_dir {
  std::string name;           // the URL's segment after /extensions/
  std::filesystem::path dir;  // absolute
  dev_t device = 0;           // the directory's identity when it was found
  ino_t inode = 0;
};

// `web.dir`, opened, if it is still the directory that was found; else nullopt, and a warning
// names the pack.
std::optional<ipc::unique_fd> open_web_dir(const extension_web_dir& web);

std::vector<extension_web_dir> extension_web_dirs(const manifests::inventory& inventory);

// The web directories one pack declares as above; `name` is the pack's (its directory's name).
std::vector<extension_web_dir> extension_web_dirs_of(const std::filesystem::path& pack_dir,
                                                     const std::string& name);

}  // namespace orch::serve
