// comfy-orch-worker: the worker executable the host spawns (docs/runtime.md). Everything it needs
// arrives on inherited fds, in the handshake, and in two variables: ORCH_WORKER_TOKEN (the
// startup token, removed from the environment once read so node code never sees it) and the
// command line below.
//
//   comfy-orch-worker --channel-fd N --fd-socket M --generation G --env NAME --library PATH
//
// The host also runs it to read the tables of plugins a pack names (ORCH_PLUGIN_PATH): loading a
// library runs its constructors, which belong in a short-lived process, not in the host.
//
//   comfy-orch-worker --probe-plugins FD DIR...   (writes `comfy-orch plugins --json` to FD)
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
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
  orch::init_logging("comfy-orch-worker");
  if (argc >= 3 && std::strcmp(argv[1], "--probe-plugins") == 0) {
    return probe_plugins(std::atoi(argv[2]),
                         std::vector<std::filesystem::path>(argv + 3, argv + argc));
  }
  orch_worker_options o{};
  o.struct_size = sizeof(o);
  o.channel_fd = -1;
  o.fd_socket = -1;
  std::string env = "worker", library, token;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--channel-fd") o.channel_fd = std::atoi(value);
    else if (key == "--fd-socket") o.fd_socket = std::atoi(value);
    else if (key == "--generation") o.generation = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    else if (key == "--env") env = value;
    else if (key == "--library") library = value;
    else return ORCH_WORKER_EXIT_USAGE;
  }
  if (const char* t = std::getenv("ORCH_WORKER_TOKEN")) token = t;
  ::unsetenv("ORCH_WORKER_TOKEN");
  if (o.channel_fd < 0 || o.fd_socket < 0 || token.empty() || library.empty()) {
    return ORCH_WORKER_EXIT_USAGE;
  }
  o.token = token.c_str();
  o.env_name = env.c_str();
  o.library = library.c_str();
  return orch_worker_run(&o);
}
