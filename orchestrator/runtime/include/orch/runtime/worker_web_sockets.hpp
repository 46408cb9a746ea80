// The sockets a Python worker serves its pack's aiohttp routes on (docs/comfyui.md, "A pack's
// aiohttp routes"). The host makes each one: a listening Unix socket in a directory only this
// user can enter, handed to the worker as a descriptor (--web-fd). So the host connects only to
// what it made, a worker cannot point it at another socket, and a request sent before the
// worker serves waits in the backlog instead of failing.
#pragma once

#include <filesystem>
#include <string>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

class worker_web_sockets {
 public:
  worker_web_sockets() = default;
  worker_web_sockets(const worker_web_sockets&) = delete;
  worker_web_sockets& operator=(const worker_web_sockets&) = delete;
  ~worker_web_sockets();  // removes the directory and what is left in it

  // A new listening socket at path_of(name), replacing the one of an earlier generation.
  result<ipc::unique_fd> listen(const std::string& name);
  // Where `name`'s socket is (whether or not it exists yet).
  std::filesystem::path path_of(const std::string& name);

 private:
  result<std::filesystem::path> directory();
  std::filesystem::path directory_;  // made on first use ($XDG_RUNTIME_DIR, else /tmp)
};

}  // namespace orch::runtime
