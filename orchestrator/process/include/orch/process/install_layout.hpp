// install_layout: where the host finds the files that were built or installed with it (its
// worker executable, its plugin directory, the native node libraries shipped with it), relative
// to its own executable and never through a path fixed at build time: an installed prefix can be
// moved and a build directory can be anywhere (docs/deployment.md, "Install and relocation").
//
// Two layouts are known, each as paths relative to the directory of the host executable:
//   - the installed one (`cmake --install`): bin/comfy-orch-worker,
//     lib/comfy-orch/plugins, lib/comfy-orch/nodes, lib/comfy-orch/liborch_worker.so,
//     share/comfy-orch/python, share/comfy-orch/frontend, share/comfy-orch/templates
//     (GNUInstallDirs names them);
//   - the build tree's: worker/comfy-orch-worker, plugins/lib, examples, lib/liborch_worker.so,
//     and the source tree's python/ (the comfy_orch package is pure Python) and
//     .deps/frontend/static and .deps/templates (the frontend and the workflow templates
//     scripts/install-deps unpacked).
// The first whose worker executable exists is used, as a whole; with neither, the installed one,
// so that messages name where an installation would have put the files.
#pragma once

#include <filesystem>

namespace orch::process {

struct install_layout {
  std::filesystem::path worker_executable;       // comfy-orch-worker
  std::filesystem::path plugin_directory;        // orch-*.so: the last fallback of the search
  std::filesystem::path node_library_directory;  // native node libraries (the example packs')
  std::filesystem::path worker_library;          // liborch_worker.so, for Python workers
  std::filesystem::path python_package_root;     // the directory holding comfy_orch/
  std::filesystem::path frontend_directory;      // ComfyUI's frontend, served by serve at /
  std::filesystem::path templates_directory;     // ComfyUI's workflow templates: /templates/
};

// The layout beside the host executable `host_executable` (an absolute path).
install_layout locate_install_layout(const std::filesystem::path& host_executable);

// A process whose executable is not comfy-orch (ComfyUI, with liborch_host.so loaded) has its
// files beside the library instead: the library says so once, before it starts a host, and
// this_install_layout() answers that from then on. The first call wins.
void use_install_layout(const install_layout& layout);

// The layout given to use_install_layout, else the one beside this process's executable
// (/proc/self/exe), computed once.
const install_layout& this_install_layout();

}  // namespace orch::process
