#include "orch/process/install_layout.hpp"

#include <atomic>
#include <system_error>

namespace orch::process {
namespace fs = std::filesystem;

namespace {

// Paths relative to the host executable's directory, set by orchestrator/CMakeLists.txt from
// GNUInstallDirs (installed) and from the targets' output directories (build tree). Relative
// paths only: nothing here names the machine the host was built on.
struct relative_layout {
  const char* worker;
  const char* plugins;
  const char* nodes;
  const char* worker_library;
  const char* python;
  const char* frontend;
  const char* templates;
};

constexpr relative_layout installed{
    ORCH_LAYOUT_INSTALLED_WORKER, ORCH_LAYOUT_INSTALLED_PLUGINS, ORCH_LAYOUT_INSTALLED_NODES,
    ORCH_LAYOUT_INSTALLED_WORKER_LIBRARY, ORCH_LAYOUT_INSTALLED_PYTHON,
    ORCH_LAYOUT_INSTALLED_FRONTEND, ORCH_LAYOUT_INSTALLED_TEMPLATES};
constexpr relative_layout build_tree{ORCH_LAYOUT_BUILD_WORKER, ORCH_LAYOUT_BUILD_PLUGINS,
                                     ORCH_LAYOUT_BUILD_NODES, ORCH_LAYOUT_BUILD_WORKER_LIBRARY,
                                     ORCH_LAYOUT_BUILD_PYTHON, ORCH_LAYOUT_BUILD_FRONTEND,
                                     ORCH_LAYOUT_BUILD_TEMPLATES};

install_layout beside(const fs::path& dir, const relative_layout& r) {
  return {(dir / r.worker).lexically_normal(), (dir / r.plugins).lexically_normal(),
          (dir / r.nodes).lexically_normal(), (dir / r.worker_library).lexically_normal(),
          (dir / r.python).lexically_normal(), (dir / r.frontend).lexically_normal(),
          (dir / r.templates).lexically_normal()};
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

install_layout locate_install_layout(const fs::path& host_executable) {
  const fs::path dir = host_executable.parent_path();
  for (const auto* r : {&installed, &build_tree}) {
    auto layout = beside(dir, *r);
    if (is_file(layout.worker_executable)) return layout;
  }
  return beside(dir, installed);
}

namespace {
std::atomic<const install_layout*> given_layout{nullptr};
}  // namespace

void use_install_layout(const install_layout& layout) {
  const install_layout* expected = nullptr;
  auto* copy = new install_layout(layout);  // lives for the process, as the computed one does
  if (!given_layout.compare_exchange_strong(expected, copy)) delete copy;
}

const install_layout& this_install_layout() {
  if (const install_layout* given = given_layout.load()) return *given;
  static const install_layout layout = [] {
    std::error_code ec;
    // The kernel's answer is absolute with every symbolic link resolved, so a link to the host
    // (/usr/local/bin/comfy-orch -> /opt/comfy-orch/bin/comfy-orch) finds the real prefix.
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    return locate_install_layout(ec ? fs::path("comfy-orch") : self);
  }();
  return layout;
}

}  // namespace orch::process
