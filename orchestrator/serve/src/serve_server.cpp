#include "orch/serve/serve_server.hpp"

#include <unistd.h>

#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "orch/process/install_layout.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/extension_web_dirs.hpp"
#include "orch/serve/fleet_auth.hpp"
#include "orch/serve/frontend_routes.hpp"
#include "orch/serve/host_fingerprint.hpp"
#include "orch/serve/serve_live_routes.hpp"
#include "orch/serve/user_data.hpp"
#include "orch/serve/worker_routes.hpp"

namespace orch::serve {

namespace {

// The frontend serve answers / with: front_end_root's (which must hold index.html), else the one
// installed beside comfy-orch (install_layout.hpp) when it is there, else none.
result<std::optional<std::filesystem::path>> frontend_root_of(const serve_config& config) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (config.front_end_root) {
    const fs::path dir = fs::absolute(*config.front_end_root, ec);
    if (!fs::is_regular_file(dir / "index.html", ec))
      return error{serve_errc::invalid_config,
                   "--front-end-root " + dir.string() +
                       " holds no index.html\n  fix: name the directory of a built frontend (the "
                       "comfyui-frontend-package wheel's comfyui_frontend_package/static)"};
    return std::optional<fs::path>(dir);
  }
  if (const fs::path dir = process::this_install_layout().frontend_directory;
      fs::is_regular_file(dir / "index.html", ec))
    return std::optional<fs::path>(dir);
  return std::optional<fs::path>();
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

serve_server::serve_server(serve_config config, const runtime::prepared_deployment& deployment,
                           std::string version)
    : config_(std::move(config)),
      version_(std::move(version)),
      directories_(file_directories_of(deployment.deployment)),
      stack_(deployment.stack) {}

serve_server::~serve_server() {
  stop();
}

result<std::unique_ptr<serve_server>> serve_server::prepare(serve_config config,
                                                            const runtime::prepared_deployment& deployment,
                                                            std::string version) {
  if (auto checked = check(config); !checked) return checked.err();
  if (config.fleet_secret_file) {
    auto secret = fleet_secret::read(*config.fleet_secret_file);
    if (!secret) return secret.err();
    config.http.fleet = std::make_shared<const fleet_secret>(std::move(*secret));
  }
  auto root = frontend_root_of(config);
  if (!root) return root.err();
  std::unique_ptr<serve_server> s(
      new serve_server(std::move(config), deployment, std::move(version)));
  s->frontend_root_ = *root;
  // The fingerprint reads the packs' files once, before any worker starts: what this host is
  // does not change while it serves.
  s->fleet_.name = s->config_.fleet_host_name.empty() ? machine_host_name()
                                                       : s->config_.fleet_host_name;
  s->fleet_.parts = fingerprint_parts_of(deployment, s->version_);
  s->fleet_.fingerprint = fingerprint_of(s->fleet_.parts);
  s->frontend_.emplace(*root, extension_web_dirs(deployment.inventory));
  s->templates_.emplace(installed_workflow_templates(),
                        example_workflow_packs(deployment.inventory));
  // ComfyUI makes its input, output and temp directories at start; so does serve, before any
  // worker starts, so that a directory it cannot make stops it at once.
  if (auto made = create_file_directories(s->directories_); !made)
    return error{made.err().code,
                 made.err().message +
                     "\n  fix: create it, or point [server] input_directory / output_directory at "
                     "directories serve may create and write (temp/ is in the ComfyUI root, or "
                     "beside the deployment file)"};
  if (s->config_.control_socket) {
    auto dir = control::open_control_directory();
    if (!dir)
      return error{dir.err().code, dir.err().message +
                                       "\n  (or start with --no-control-socket "
                                       "to serve without one)"};
    control_endpoint e{*dir, {}};
    e.registration.pid = ::getpid();
    std::error_code ec;
    e.registration.deployment = std::filesystem::canonical(deployment.deployment.file, ec).string();
    e.registration.socket = (*dir / (std::to_string(::getpid()) + ".sock")).string();
    e.registration.version = s->version_;
    e.registration.started_unix_ms = unix_ms_now();
    s->endpoint_ = std::move(e);
  }
  return s;
}

nlohmann::json serve_server::identity() const {
  nlohmann::json id = {{"pid", static_cast<long>(::getpid())}, {"version", version_}};
  if (endpoint_) id["deployment"] = endpoint_->registration.deployment;
  return id;
}

std::optional<std::string> serve_server::control_socket_path() const {
  if (!endpoint_) return std::nullopt;
  return endpoint_->registration.socket;
}

result<std::uint16_t> serve_server::start(runtime::host_runtime& host) {
  host_ = &host;
  http_limits limits = config_.http;
  // A body for a pack's route is the pack's: spooled, as uploads are (the routes are the
  // workers' once they are ready; a restarted worker registers the same).
  const auto worker_routes = worker_routes_of(host);
  for (const auto& line : worker_route_clashes(worker_routes)) spdlog::warn("serve: {}", line);
  limits.body_rule_for = [this, worker_routes](const std::string& method, const std::string& path) {
    return routes_.takes_upload(method, path) || env_answering(worker_routes, path)
               ? body_rule{config_.max_upload, true}
               : body_rule{config_.http.max_body, false};
  };
  limits.spool_directory = directories_.temp;

  sampler_ =
      std::make_unique<live::memory_sampler>(host, config_.sample_period, config_.timeline_samples);
  host.set_memory_event_sink(
      [s = sampler_.get()](const std::string& kind, const std::string& env,
                           const std::string& text) { s->note(kind, env, text); });
  views_ = std::make_unique<live::live_views>(host, *sampler_, identity());
  // Nothing reaches the table before listen(), by which time every route is in it.
  http_ = std::make_unique<http_server>(
      host.io(), limits, [this](const http_request& r) { return routes_.answer(r); },
      [this](const http_request& r) { return routes_.at_once(r); },
      [this](const std::string& sid) { return api_->greeting(sid); });
  control_ = std::make_unique<control::control_socket>(
      host.io(), [v = views_.get()](const nlohmann::json& request) { return v->answer(request); });
  sampler_->start();
  api_ = std::make_unique<comfy_api>(
      host, *http_, config_.history_size, server_identity{version_, stack_}, config_.queue,
      frontend_routes(std::move(*frontend_), user_data(directories_.user), config_.max_upload,
                      std::move(*templates_)));
  frontend_.reset();
  templates_.reset();
  add_live_routes(routes_, *views_);
  add_fleet_host_route(routes_, host, std::move(fleet_), [api = api_.get()] {
    queue_state q;
    api->queue().visit_queue([&q](const queued_prompt&, bool running) {
      if (running) q.running = true;
      else ++q.queued;
    });
    return q;
  });
  api_->add_routes(routes_);

  if (endpoint_)
    if (auto listening = control_->listen(endpoint_->registration.socket); !listening)
      return listening.err();
  auto port = http_->listen(config_.listen, config_.port);
  if (!port)
    return error{port.err().code, port.err().message +
                                      "\n  fix: choose another --port (0 picks "
                                      "a free one) or --listen address"};
  if (endpoint_) {
    endpoint_->registration.http = "http://" + config_.listen + ":" + std::to_string(*port);
    if (auto written = control::write_registration(endpoint_->dir, endpoint_->registration); !written)
      spdlog::warn("serve: {} (`comfy-orch ls` will not list this server)", written.err().message);
  }
  return *port;
}

void serve_server::stop() {
  if (stopped_ || host_ == nullptr) return;
  stopped_ = true;
  if (endpoint_) control::remove_registration(endpoint_->dir, ::getpid());
  control_->stop();
  sampler_->stop();
  api_->stop(config_.on_stop == stop_mode::interrupt, config_.stop_grace);
  http_->stop();  // the API thread is joined: nothing answers from here on
  api_.reset();
  // The sampler goes with this; the host may not (a test's host outlives its server).
  if (!host_->stopped()) host_->on_io_thread([this] { host_->set_memory_event_sink({}); });
}

}  // namespace orch::serve
