// serve_server: the composition root of `comfy-orch serve` (docs/serve.md). Made from a
// serve_config and a deployment, it owns serve's parts and wires them: the route table (ComfyUI's
// routes, the live views', the packs' and the frontend's), the HTTP and WebSocket listener,
// ComfyUI's API with its queue, the memory sampler and live views, and the control socket with
// its registration. The CLI parses flags into the config and runs one; a test makes one the same
// way in-process. The host is lent, not owned: the command starts it as `comfy-orch run` starts
// its own (command_host.hpp), after prepare() has checked what would stop serve before any worker
// starts, and shuts it down after stop().
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "orch/control/control_directory.hpp"
#include "orch/control/control_socket.hpp"
#include "orch/live/live_views.hpp"
#include "orch/live/memory_sampler.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/serve/fleet_host_route.hpp"
#include "orch/serve/frontend_files.hpp"
#include "orch/serve/route_table.hpp"
#include "orch/serve/serve_api.hpp"
#include "orch/serve/serve_config.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/serve/workflow_templates.hpp"

namespace orch::serve {

class serve_server {
 public:
  // Checks `config` and makes what serve needs before any worker starts, so that a mistake stops
  // it at once: the frontend it serves, the input, output and temp directories (as ComfyUI makes
  // them at start), and the control directory. `version` is comfy-orch's, shown in /system_stats
  // and the registration.
  // Errors: invalid_config (check(), a front_end_root without index.html, a fleet_secret_file
  // fleet_secret::read refuses), directory_unusable
  // (which directory, and why), the control directory's (control_errc).
  static result<std::unique_ptr<serve_server>> prepare(serve_config config,
                                                       const runtime::prepared_deployment& deployment,
                                                       std::string version);
  ~serve_server();  // stop()
  serve_server(const serve_server&) = delete;
  serve_server& operator=(const serve_server&) = delete;

  // Builds the parts over `host` (started from the same deployment; it must outlive this) and
  // starts them: the control socket, the listener, then the registration. Once only. The bound
  // port. Errors: the control socket's (control_errc), listen_failed.
  result<std::uint16_t> start(runtime::host_runtime& host);

  // In order: the registration and control socket go, the sampler stops, the queued prompts are
  // dropped and the running one interrupted (or let finish, config.on_stop), the connections are
  // closed. The host goes on, for its owner to shut down. Idempotent; not on the io thread.
  void stop();

  const serve_config& config() const noexcept { return config_; }
  // The frontend served at /; nullopt when there is none (/ says how to get one).
  const std::optional<std::filesystem::path>& frontend_root() const noexcept {
    return frontend_root_;
  }
  // The control socket's path; nullopt without one.
  std::optional<std::string> control_socket_path() const;

 private:
  // The control socket and its registration (docs/cli.md, "The control socket").
  struct control_endpoint {
    std::filesystem::path dir;
    control::server_registration registration;
  };

  serve_server(serve_config config, const runtime::prepared_deployment& deployment, std::string version);
  // The live views' identity: this process, its version and deployment.
  nlohmann::json identity() const;

  serve_config config_;
  std::string version_;
  file_directories directories_;
  std::optional<std::filesystem::path> frontend_root_;
  std::optional<frontend_files> frontend_;
  std::optional<workflow_templates> templates_;  // the official ones and the packs' examples
  std::optional<manifests::host_stack> stack_;
  std::optional<control_endpoint> endpoint_;
  fleet_identity fleet_;  // GET /orch/fleet/host's name and fingerprint, made in prepare()

  runtime::host_runtime* host_ = nullptr;  // lent by start()
  route_table routes_;
  std::unique_ptr<live::memory_sampler> sampler_;
  std::unique_ptr<live::live_views> views_;
  std::unique_ptr<http_server> http_;
  std::unique_ptr<control::control_socket> control_;
  std::unique_ptr<comfy_api> api_;
  bool stopped_ = false;
};

}  // namespace orch::serve
