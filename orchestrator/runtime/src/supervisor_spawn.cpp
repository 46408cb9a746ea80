// Starting a worker (docs/runtime.md): the spawn with its channel, fd socket and token pipe,
// and the handshake (hello, ready, setup_failed). The rest of supervision is in supervisor.cpp.
#include "orch/process/leftover_processes.hpp"
#include "orch/runtime/python_worker_command.hpp"
#include "orch/runtime/supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/handshake.hpp"
#include "orch/process/child_process.hpp"
#include "orch/process/errc.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {
namespace {

using nlohmann::json;
using clock = std::chrono::steady_clock;

std::string make_token() {
  std::random_device rd;
  static constexpr char hex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 4; ++i) {
    std::uint32_t v = rd();
    for (int k = 0; k < 8; ++k, v >>= 4) token.push_back(hex[v & 0xf]);
  }
  return token;
}

}  // namespace

void supervisor::spawn(worker& w) {
  w.info.generation += 1;
  w.info.state = worker_state::starting;
  w.info.nodes = json::array();
  w.token = make_token();
  w.answered_shutdown = false;
  w.said_bad_ui_message = false;
  const std::uint32_t generation = w.info.generation;
  w.setup_failure.clear();
  // `peer_gone`: the child may already have exited, so its exit status is worth waiting for.
  auto fail_start = [&](const std::string& why, bool peer_gone = false) {
    w.info.last_error = "worker for env " + w.spec.env + " could not be started: " + why;
    spdlog::error("{}", w.info.last_error);
    lose(w, generation, why, peer_gone);
  };
  int chan[2], fds[2];
  // EMFILE here is the open-file limit: say so, with the fix (ulimit -n).
  auto socketpair_failed = [](int err) {
    return std::string("socketpair failed: ") + std::strerror(err) +
           (err == EMFILE || err == ENFILE
                ? " (each worker needs about 8 descriptors; raise the limit, e.g. ulimit -n 4096)"
                : "");
  };
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0)
    return fail_start(socketpair_failed(errno));
  ipc::unique_fd chan_host(chan[0]), chan_child(chan[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return fail_start(socketpair_failed(errno));
  ipc::unique_fd fds_host(fds[0]), fds_child(fds[1]);
  int lane[2];  // the call lane (call_lane.hpp): opened once the worker's ready says it reads it
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lane) != 0)
    return fail_start(socketpair_failed(errno));
  ipc::unique_fd lane_host(lane[0]), lane_child(lane[1]);
  auto lane_page = ipc::lane_memory::create();
  if (!lane_page) return fail_start("cannot make the call lane's page: " + lane_page.err().message);

  // The worker follows the host's manager unless its pack or the operator set the variable or
  // comfy-env's alias for it (derived values are written only where absent).
  process::environment derived{{"ORCH_WORKER_ENV", w.spec.env},
                               {"ORCH_DEVICE", w.spec.device.to_string()}};
  process::environment env =
      process::build_worker_environment(options_.operator_env, w.spec.env_vars, derived);
  // The mark its descendants inherit: what it leaves behind is killed with it (always ours:
  // neither the pack nor the operator sets it).
  env[process::worker_instance_variable] = instance_of(w, generation);
  if (env.count(plugins::worker_pager_alias) == 0) {
    env.emplace(plugins::worker_pager_variable,
                plugins::worker_pager_value(options_.host_manager.manager));
  }
  // The token travels in a pipe the worker reads once (fd 5), never in the environment, which
  // stays readable in /proc/<pid>/environ for the life of the process; none is taken from a layer.
  env.erase("ORCH_WORKER_TOKEN");
  int token_pipe[2];
  if (::pipe2(token_pipe, O_CLOEXEC) != 0) {
    return fail_start(std::string("pipe failed: ") + std::strerror(errno));
  }
  ipc::unique_fd token_read(token_pipe[0]);
  {
    // A few dozen bytes fit any pipe buffer; closing the write end gives the worker end of file.
    ipc::unique_fd token_write(token_pipe[1]);
    if (::write(token_write.get(), w.token.data(), w.token.size()) !=
        static_cast<ssize_t>(w.token.size())) {
      return fail_start(std::string("cannot write the startup token: ") + std::strerror(errno));
    }
  }
  process::spawn_request req;
  req.args = {"--channel-fd", std::to_string(process::worker_channel_fd),
              "--fd-socket",  std::to_string(process::worker_fd_socket),
              "--token-fd",   std::to_string(process::worker_token_fd),
              "--generation", std::to_string(generation),
              "--env",        w.spec.env};
  ipc::unique_fd web_listener;
  if (w.spec.python) {
    python_worker_command(*w.spec.python, options_, req, env);
    // Its pack's aiohttp routes are served on this socket (worker_web_sockets.hpp); a worker
    // without one still runs, its routes not served.
    if (auto listener = web_sockets_.listen(w.web_name)) {
      web_listener = std::move(*listener);
      w.info.web_socket = web_sockets_.path_of(w.web_name);
      req.args.insert(req.args.end(), {"--web-fd", std::to_string(process::worker_web_fd)});
    } else {
      spdlog::warn("worker {}: {}; its pack's aiohttp routes are not served", w.spec.env,
                   listener.err().message);
    }
    // torch's allocator in the worker goes through the injected allocator plugin where torch
    // has CUDA (python/comfy_orch/worker/_torch_allocator.py).
    if (w.spec.plugins.allocator) {
      env["ORCH_ALLOCATOR_PLUGIN"] = w.spec.plugins.allocator->path.string();
    }
  } else {
    req.executable = options_.worker_executable;
    req.args.insert(req.args.end(), {"--library", w.spec.library.string()});
  }
  req.envp = process::to_envp(env);
  // Its stdout and stderr: a pipe this host reads, never the host's own descriptors.
  int output_pipe[2];
  if (::pipe2(output_pipe, O_CLOEXEC) != 0) {
    return fail_start(std::string("pipe failed: ") + std::strerror(errno));
  }
  ipc::unique_fd output_read(output_pipe[0]), output_write(output_pipe[1]);
  req.output_fd = output_write.get();
  req.fds = {{chan_child.get(), process::worker_channel_fd},
             {fds_child.get(), process::worker_fd_socket},
             {token_read.get(), process::worker_token_fd}};
  if (web_listener.valid()) req.fds.push_back({web_listener.get(), process::worker_web_fd});
  auto pid = options_.launcher->spawn(req);
  if (!pid) {
    // An executable that cannot be run will not run on a retry either.
    if (pid.err().code == process::process_errc::exec_failed) w.setup_failure = pid.err().message;
    return fail_start(pid.err().message);
  }
  w.info.pid = *pid;
  w.info.spawned_at = w.policy.started();  // on the clock the policy's window is measured by
  output_write.reset();
  std::erase_if(retired_outputs_, [](const auto& o) { return !o->open(); });
  if (w.output) retired_outputs_.push_back(std::move(w.output));
  w.output = worker_output::start(io_, std::move(output_read), w.spec.env);
  chan_child.reset();
  fds_child.reset();
  token_read.reset();

  auto identity = options_.launcher->identity(*pid);
  auto slot =
      identity ? memory_.control().claim_slot(*identity) : result<std::uint32_t>(identity.err());
  if (!slot) return fail_start("no control slot: " + slot.err().message);
  w.info.slot = *slot;
  w.has_slot = true;
  w.last_beat = 0;
  w.last_beat_at = clock::now();

  // The segments the worker maps: control (sealed: read-only to it), its own slot, sim device,
  // pool (fd_passing.hpp, docs/protocol.md).
  // The slot's fd leaves the host once sent (control_segment::take_slot_fd).
  const ipc::unique_fd slot_fd = memory_.control().take_slot_fd(w.info.slot);
  std::vector<int> pass{memory_.control().fd(), slot_fd.get()};
  const bool sim = memory_.sim_fd() >= 0;
  if (sim) pass.push_back(memory_.sim_fd());
  for (std::size_t i = 0; i < memory_.pool().segment_count(); ++i) {
    pass.push_back(memory_.pool().segment(i).fd());
  }
  // Last, flagged in the first byte (docs/protocol.md).
  pass.insert(pass.end(), {lane_child.get(), lane_page->fd()});
  const std::byte header[2] = {
      std::byte{static_cast<std::uint8_t>((sim ? ipc::segments_flags::sim : 0) |
                                          ipc::segments_flags::lane)},
      std::byte{static_cast<std::uint8_t>(memory_.pool().segment_count())}};
  if (auto st = ipc::send_fds(fds_host.get(), header, pass); !st) {
    return fail_start("cannot pass segments: " + st.err().message, /*peer_gone=*/true);
  }
  w.fd_socket = std::move(fds_host);
  lane_child.reset();
  lane_page->close_fd();
  w.lane_end = std::make_unique<ipc::lane_endpoint>(
      ipc::lane_socket(std::move(lane_host), "host<->" + w.spec.env, generation),
      std::move(*lane_page), ipc::lane_side::host);

  ipc::channel::socket_type socket(io_);
  socket.assign(boost::asio::local::stream_protocol(), chan_host.release());
  ipc::channel_options co;
  co.name = "host<->" + w.spec.env;
  co.generation = generation;
  co.accept_generation = generation;
  co.on_frame_handled = [lane = w.lane, generation](std::uint64_t frames) {
    lane->frames_handled(generation, frames);
  };
  w.channel = ipc::channel::create(std::move(socket), co);
  std::weak_ptr<worker> weak = w.self;
  w.channel->start(
      [this, weak, generation](ipc::message m) {
        if (auto wp = weak.lock()) on_message(*wp, generation, std::move(m));
      },
      [this, weak, generation](const error& e) {
        if (auto wp = weak.lock()) {
          lose(*wp, generation, "its channel closed (" + e.code + ": " + e.message + ")",
               /*peer_gone=*/true);
        }
      });
  spdlog::info("worker {}: spawned pid {} generation {} slot {}", w.spec.env, *pid, generation,
               w.info.slot);

  w.timer.expires_after(options_.timing.handshake_timeout);
  w.timer.async_wait([this, weak, generation](const boost::system::error_code& ec) {
    auto wp = weak.lock();
    if (ec || !wp || wp->info.generation != generation || wp->info.state != worker_state::starting)
      return;
    const std::string why = "did not complete its handshake within " +
                            std::to_string(options_.timing.handshake_timeout.count()) + " ms";
    wp->info.last_error = "worker for env " + wp->spec.env + " (pid " +
                          std::to_string(wp->info.pid) + ") " + why +
                          "; check that [worker] library is a node pack and the worker starts "
                          "(ORCH_LOG_LEVEL=debug), or raise [workers] handshake_timeout";
    spdlog::error("{}", wp->info.last_error);
    lose(*wp, generation, why);
  });
}

void supervisor::on_hello(worker& w, const ipc::message& m) {
  const auto token = m.body["token"].get<std::string>();
  const auto pid = m.body["pid"].get<std::uint64_t>();
  if (token != w.token || pid != static_cast<std::uint64_t>(w.info.pid) ||
      m.body["protocol"].get<std::uint64_t>() != ipc::protocol_version) {
    spdlog::error("worker {}: hello refused (token, pid or protocol does not match)", w.spec.env);
    w.channel->respond_error(m.header,
                             {ipc::handshake_errc::bad_hello, "token, pid or protocol mismatch"});
    // Not worth waiting for it to leave: whoever sent this is not the worker the host started.
    return lose(w, w.info.generation,
                "sent a hello that does not match its startup token, pid or protocol; refused");
  }
  w.channel->respond(m.header, handshake_for(w));
}

void supervisor::on_ready(worker& w, const ipc::message& m) {
  if (w.info.state != worker_state::starting) {
    return w.channel->respond_error(
        m.header, {ipc::handshake_errc::out_of_order, "ready outside the handshake"});
  }
  w.timer.cancel();
  w.info.nodes = m.body["nodes"];
  w.info.plugins = m.body["plugins"];
  report_divergence(w);
  w.info.state = worker_state::ready;
  w.info.ready_at = options_.clock();
  w.last_beat = memory_.control().block(w.info.slot).heartbeat.load(std::memory_order_acquire);
  w.last_beat_at = clock::now();
  w.channel->respond(m.header, json::object());
  if (m.body.value("lane", false) && w.lane_end) {
    w.lane->open(std::move(w.lane_end), w.info.generation, w.spec.call_timeout);
  }
  w.lane_end.reset();
  spdlog::info("worker {}: ready (pid {}, generation {}, {} node classes)", w.spec.env, w.info.pid,
               w.info.generation, w.info.nodes.size());
  if (on_state) on_state(w.info);
  dispatch(w);
}

void supervisor::on_setup_failed(worker& w, const ipc::message& m) {
  if (w.info.state != worker_state::starting) {
    return w.channel->respond_error(
        m.header, {ipc::handshake_errc::out_of_order, "setup_failed outside the handshake"});
  }
  // Kept for the loss that follows (the worker closes its channel once answered): a set-up that
  // failed (a library that is no pack, a plugin that does not load) fails the same way again.
  // The text is the worker's (a pack's constructor has run there): printable before it is kept.
  w.setup_failure = printable("[" + m.body["code"].get<std::string>() + "] " +
                              m.body["message"].get<std::string>());
  w.channel->respond(m.header, json::object());
}

json supervisor::handshake_for(const worker& w) const {
  // The host settings that shape the worker's memory (ipc/handshake.hpp, read back by the
  // worker). The pool segments are listed in the order their fds were sent: each receiver checks
  // an fd against what the host announced before mapping it.
  ipc::handshake_settings s;
  for (std::size_t i = 0; i < memory_.pool().segment_count(); ++i) {
    const auto& seg = memory_.pool().segment(i);
    s.pool_segments.push_back({seg.id(), seg.total_size()});
  }
  const auto& p = w.spec.plugins;
  auto path = [](const auto& entry) { return entry ? entry->path.string() : std::string(); };
  s.slot = w.info.slot;
  s.generation = w.info.generation;
  s.device = manifests::to_string(w.spec.device.kind);
  s.ordinal = w.spec.device.index;
  s.backend_plugin = w.spec.backend_plugin;
  s.host_manager = plugins::to_string(options_.host_manager.manager);
  s.level = p.pager ? p.level : p.host_level;
  s.pager_plugin = path(p.pager);
  s.ledger_plugin = path(p.ledger);
  s.allocator_plugin = path(p.allocator);
  s.no_pager_reason = p.ledger_reason.value_or("");
  s.memory = w.spec.memory;
  s.heartbeat_ms = static_cast<std::uint32_t>(options_.timing.heartbeat_interval.count());
  return ipc::to_json(s);
}

}  // namespace orch::runtime
