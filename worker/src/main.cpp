// comfy-orch-worker: the worker executable the host spawns for a native pack (docs/runtime.md):
// liborch_worker.so's orch_worker_main with the pack's node library (--library).
//
// The host also runs it to read the tables of plugins a pack names (ORCH_PLUGIN_PATH): loading a
// library runs its constructors, which belong in a short-lived process, not in the host.
//
//   comfy-orch-worker --probe-plugins FD DIR...   (writes `comfy-orch plugins --json` to FD)
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

#include "orch/plugins/registry.hpp"
#include "orch/support/logging.hpp"
#include "orch/worker/worker.h"

namespace {

int probe_plugins(int fd, const std::vector<std::filesystem::path>& dirs) {
  const std::string text = orch::plugins::to_json(orch::plugins::scan_directories(dirs)).dump();
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ORCH_WORKER_EXIT_USAGE;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "--probe-plugins") {
    char* end = nullptr;
    const long fd = argc >= 3 ? std::strtol(argv[2], &end, 10) : -1;
    if (fd < 0 || fd > 0x7fffffff || end == argv[2] || *end != '\0') {
      std::fputs(
          "comfy-orch-worker: --probe-plugins needs an fd number, then directories; see "
          "comfy-orch-worker --help\n",
          stderr);
      return ORCH_WORKER_EXIT_USAGE;
    }
    orch::init_logging("comfy-orch-worker probe");
    return probe_plugins(static_cast<int>(fd),
                         std::vector<std::filesystem::path>(argv + 3, argv + argc));
  }
  return orch_worker_main(argc, argv, nullptr, nullptr);
}
