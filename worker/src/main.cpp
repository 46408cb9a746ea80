// comfy-orch-worker: the worker executable the host spawns (docs/runtime.md). Everything it needs
// arrives on inherited fds, in the handshake, and in two variables: ORCH_WORKER_TOKEN (the
// startup token, removed from the environment once read so node code never sees it) and the
// command line below.
//
//   comfy-orch-worker --channel-fd N --fd-socket M --generation G --env NAME --library PATH
#include <cstdlib>
#include <cstring>
#include <string>

#include "orch/support/logging.hpp"
#include "orch/worker/worker.h"

int main(int argc, char** argv) {
  orch::init_logging("comfy-orch-worker");
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
