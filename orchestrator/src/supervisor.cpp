#include "orch/orchestrator/supervisor.hpp"

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

#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/orchestrator/worker_process.hpp"
#include "json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::orchestrator {
namespace {

using nlohmann::json;
using clock = std::chrono::steady_clock;
constexpr int missed_beats_for_hung = 3;
// How long a worker that closed its channel while starting is given to exit on its own, so its
// exit status can be read (it is exiting already; a live one is SIGKILLed after this).
constexpr std::chrono::milliseconds exit_status_grace{250};

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

// A worker's models report: [{key text, size uint, resident uint}] with a sequence >= 1.
bool valid_models_report(const json& body) {
  auto seq = body.find("sequence");
  auto models = body.find("models");
  if (seq == body.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0 ||
      models == body.end() || !models->is_array()) {
    return false;
  }
  return std::all_of(models->begin(), models->end(), [](const json& m) {
    return m.is_object() && m.contains("key") && m["key"].is_string() && m.contains("size") &&
           m["size"].is_number_unsigned() && m.contains("resident") &&
           m["resident"].is_number_unsigned();
  });
}

// The exit statuses of a worker that stopped while starting and cannot do better on a retry
// (worker_process.hpp): its command line was refused, its set-up failed, or a wrapper found no command.
std::optional<std::string> unrecoverable_exit(int status) {
  if (!WIFEXITED(status)) return std::nullopt;
  switch (WEXITSTATUS(status)) {
    case worker_exit_usage:
      return "it exited with 64 (ORCH_WORKER_EXIT_USAGE: its command line was refused; is "
             "ORCH_WORKER_EXECUTABLE a comfy-orch-worker of this build?)";
    case worker_exit_setup:
      return "it exited with 66 (ORCH_WORKER_EXIT_SETUP: a plugin, a segment or its node "
             "library failed; its log says which)";
    case 127:
      return "it exited with 127 (a command it runs was not found)";
    default:
      return std::nullopt;
  }
}

}  // namespace

const char* to_string(worker_state state) noexcept {
  switch (state) {
    case worker_state::starting:
      return "starting";
    case worker_state::ready:
      return "ready";
    case worker_state::backoff:
      return "backoff";
    case worker_state::failed:
      return "failed";
    case worker_state::stopping:
      return "stopping";
    case worker_state::stopped:
      return "stopped";
  }
  return "unknown";
}

supervisor::supervisor(boost::asio::io_context& io, host_memory& memory, supervisor_options options)
    : io_(io),
      memory_(memory),
      options_(std::move(options)),
      heartbeat_timer_(io),
      divergence_(options_.host_manager, options_.debug_worker) {
  arm_heartbeat_check();
}

supervisor::~supervisor() {
  heartbeat_timer_.cancel();
  finish_shutdown(std::chrono::milliseconds(0));
}

void supervisor::start(worker_spec spec) {
  auto w = std::make_shared<worker>(io_);
  w->self = w;
  w->info.env = spec.env;
  w->spec = std::move(spec);
  worker& ref = *w;
  workers_[ref.spec.env] = std::move(w);
  spawn(ref);
}

json supervisor::settings_for(const worker& w) const {
  // The host settings that shape the worker's memory, as one object the worker reads back
  // (worker_memory.hpp host_settings). The pool segments are listed in the order their fds were
  // sent: each receiver checks an fd against what the host announced before mapping it.
  json segments = json::array();
  for (std::size_t i = 0; i < memory_.pool().segment_count(); ++i) {
    const auto& seg = memory_.pool().segment(i);
    segments.push_back({{"segment", seg.id()}, {"total_size", seg.total_size()}});
  }
  const auto& p = w.spec.plugins;
  const auto& m = w.spec.memory;
  auto path = [](const auto& entry) { return entry ? entry->path.string() : std::string(); };
  return {{"slot", w.info.slot},
          {"pool_segments", segments},
          {"device", manifests::to_string(w.spec.device.kind)},
          {"ordinal", w.spec.device.index},
          {"backend_plugin", w.spec.backend_plugin},
          {"host_manager", plugins::to_string(options_.host_manager.manager)},
          {"level", p.pager ? p.level : p.host_level},
          {"pager_plugin", path(p.pager)},
          {"ledger_plugin", path(p.ledger)},
          {"allocator_plugin", path(p.allocator)},
          {"no_pager_reason", p.ledger_reason.value_or("")},
          {"streams", m.streams},
          {"page_size", m.page_size},
          {"reserve_vram", m.reserve_vram},
          {"simple_headroom", m.simple_headroom},
          {"pressure_source", m.pressure_source},
          {"pinned_memory", m.pinned_memory},
          {"heartbeat_ms", static_cast<std::uint64_t>(options_.timing.heartbeat_interval.count())},
          {"generation", w.info.generation}};
}

void supervisor::spawn(worker& w) {
  w.info.generation += 1;
  w.info.state = worker_state::starting;
  w.info.nodes = json::array();
  w.token = make_token();
  w.answered_shutdown = false;
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

  // The worker follows the host's manager unless its pack or the operator set the variable or
  // comfy-env's alias for it (derived values are written only where absent).
  environment derived{{"ORCH_WORKER_ENV", w.spec.env}, {"ORCH_DEVICE", w.spec.device.to_string()}};
  environment env = build_worker_environment(options_.operator_env, w.spec.env_vars, derived);
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
  spawn_request req;
  req.executable = options_.worker_executable;
  req.args = {"--channel-fd", std::to_string(worker_channel_fd),
              "--fd-socket",  std::to_string(worker_fd_socket),
              "--token-fd",   std::to_string(worker_token_fd),
              "--generation", std::to_string(generation),
              "--env",        w.spec.env,
              "--library",    w.spec.library.string()};
  req.envp = to_envp(env);
  req.channel_fd = chan_child.get();
  req.fd_socket = fds_child.get();
  req.token_fd = token_read.get();
  auto pid = spawn_worker(req);
  if (!pid) {
    // An executable that cannot be run will not run on a retry either.
    if (pid.err().code == "exec_failed") w.setup_failure = pid.err().message;
    return fail_start(pid.err().message);
  }
  w.info.pid = *pid;
  w.info.spawned_at = clock::now();
  chan_child.reset();
  fds_child.reset();
  token_read.reset();

  auto identity = ipc::read_process_identity(*pid);
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
  const std::byte header[2] = {
      std::byte{sim ? std::uint8_t{1} : std::uint8_t{0}},
      std::byte{static_cast<std::uint8_t>(memory_.pool().segment_count())}};
  if (auto st = ipc::send_fds(fds_host.get(), header, pass); !st) {
    return fail_start("cannot pass segments: " + st.err().message, /*peer_gone=*/true);
  }
  w.fd_socket = std::move(fds_host);

  ipc::channel::socket_type socket(io_);
  socket.assign(boost::asio::local::stream_protocol(), chan_host.release());
  ipc::channel_options co;
  co.name = "host<->" + w.spec.env;
  co.generation = generation;
  co.accept_generation = generation;
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

void supervisor::on_message(worker& w, std::uint32_t generation, ipc::message m) {
  if (w.info.generation != generation) return;  // a handler of a replaced generation
  switch (static_cast<ipc::message_type>(m.header.type)) {
    case ipc::message_type::hello:
      return on_hello(w, m);
    case ipc::message_type::ready:
      return on_ready(w, m);
    case ipc::message_type::setup_failed:
      return on_setup_failed(w, m);
    case ipc::message_type::allocate: {
      // The host alone writes allocation metadata (DESIGN.md §4.2): the worker gets a lease.
      auto d = memory_.leases().allocate(w.info.slot, m.body["size"].get<std::uint64_t>());
      if (!d) return w.channel->respond_error(m.header, d.err());
      return w.channel->respond(m.header, {{"descriptor", ipc::descriptor_to_json(*d)}});
    }
    case ipc::message_type::lease_free: {
      auto d = ipc::descriptor_from_json(m.body["descriptor"]);
      if (d) (void)memory_.leases().free(*d, w.info.slot);
      return;
    }
    case ipc::message_type::lease_release: {
      auto d = ipc::descriptor_from_json(m.body["descriptor"]);
      if (d) (void)memory_.leases().release(*d, w.info.slot);
      return;
    }
    case ipc::message_type::progress:
      if (on_progress) on_progress(w.spec.env, m.body);
      return;
    case ipc::message_type::ping:
      return w.channel->respond(m.header, json::object());
    case ipc::message_type::pinned_grant: {
      // The worker's reservation passed its grant (docs/shared-memory.md).
      auto grant = memory_.grant(w.info.slot, m.body["bytes"].get<std::uint64_t>());
      if (!grant) return w.channel->respond_error(m.header, grant.err());
      return w.channel->respond(m.header, {{"grant", *grant}});
    }
    default:
      if (m.header.request_id != 0) {
        w.channel->respond_error(m.header, {"unsupported", "the host does not serve this"});
      }
  }
}

void supervisor::on_hello(worker& w, const ipc::message& m) {
  const auto token = m.body["token"].get<std::string>();
  const auto pid = m.body["pid"].get<std::uint64_t>();
  if (token != w.token || pid != static_cast<std::uint64_t>(w.info.pid) ||
      m.body["protocol"].get<std::uint64_t>() != ipc::protocol_version) {
    spdlog::error("worker {}: hello refused (token, pid or protocol does not match)", w.spec.env);
    w.channel->respond_error(m.header, {"bad_hello", "token, pid or protocol mismatch"});
    // Not worth waiting for it to leave: whoever sent this is not the worker the host started.
    return lose(w, w.info.generation,
                "sent a hello that does not match its startup token, pid or protocol; refused");
  }
  w.channel->respond(m.header, settings_for(w));
}

void supervisor::on_ready(worker& w, const ipc::message& m) {
  if (w.info.state != worker_state::starting) {
    return w.channel->respond_error(m.header, {"unexpected", "ready outside the handshake"});
  }
  w.timer.cancel();
  w.info.nodes = m.body["nodes"];
  w.info.plugins = m.body["plugins"];
  report_divergence(w);
  w.info.state = worker_state::ready;
  w.info.ready_at = clock::now();
  w.last_beat = memory_.control().block(w.info.slot).heartbeat.load(std::memory_order_acquire);
  w.last_beat_at = clock::now();
  w.channel->respond(m.header, json::object());
  spdlog::info("worker {}: ready (pid {}, generation {}, {} node classes)", w.spec.env, w.info.pid,
               w.info.generation, w.info.nodes.size());
  if (on_state) on_state(w.info);
  dispatch(w);
}

void supervisor::on_setup_failed(worker& w, const ipc::message& m) {
  if (w.info.state != worker_state::starting) {
    return w.channel->respond_error(m.header, {"unexpected", "setup_failed outside the handshake"});
  }
  // Kept for the loss that follows (the worker closes its channel once answered): a set-up that
  // failed (a library that is no pack, a plugin that does not load) fails the same way again.
  // The text is the worker's (a pack's constructor has run there): printable before it is kept.
  w.setup_failure = printable("[" + m.body["code"].get<std::string>() + "] " +
                              m.body["message"].get<std::string>());
  w.channel->respond(m.header, json::object());
}

void supervisor::report_divergence(worker& w) {
  const json& p = w.info.plugins;
  w.info.manager = text_field(p, "manager");
  w.info.manager_reason = printable(text_field(p, "reason"));  // a pack's text, for the table
  const auto manager = w.info.manager == "pager" ? plugins::memory_manager::pager
                                                 : plugins::memory_manager::ledger;
  const unsigned level = manager == plugins::memory_manager::pager ? w.spec.plugins.level : 0;
  const std::uint64_t expected = plugins::applied_settings_hash(w.spec.memory, manager, level);
  // The worker published its snapshot before it sent ready.
  const auto stats = memory_.control().block(w.info.slot).read();
  const std::uint64_t published = stats ? stats->settings_hash : 0;
  w.info.settings_match = published == expected;
  if (!w.info.settings_match) {
    spdlog::warn("worker {}: applied memory settings hash {:016x}, the host expects {:016x}: "
                 "the worker runs other settings than the host sent (a stale build?)",
                 w.spec.env, published, expected);
  }
  // ORCH_DIVERGENCE_ACK in the pack's [env_vars] (which win, as in the worker's environment) or
  // the operator's shell: intended divergence, when it reads as set.
  std::optional<std::string> ack;
  if (auto it = options_.operator_env.find(divergence_ack_variable);
      it != options_.operator_env.end()) {
    ack = it->second;
  }
  for (const auto& [name, value] : w.spec.env_vars) {
    if (name == divergence_ack_variable) ack = value;
  }
  const bool acknowledged = ack && plugins::reads_as_on(plugins::read_flag(*ack));
  worker_memory_report report{w.spec.env, {manager, w.info.manager_reason}, w.spec.plugins.notes,
                              acknowledged};
  for (const auto& line : divergence_.on_worker_ready(report)) {
    if (line.level == report_level::warning) {
      spdlog::warn("{}", line.text);
    } else {
      spdlog::info("{}", line.text);
    }
  }
}

void supervisor::report_models(const std::string& env, const json& body) {
  if (!on_models || !body.is_object() || !body.contains("models")) return;
  if (!valid_models_report(body)) {
    spdlog::warn("worker {}: ignored a malformed models report", env);
    return;
  }
  on_models(env, body["models"], body["sequence"].get<std::uint64_t>());
}

void supervisor::request_release(worker& w, ipc::message_type type, json body, call_done done) {
  // A release's receipt carries the worker's models: the stand-ins follow it, unless the worker
  // was lost meanwhile (its stand-ins went with it).
  std::weak_ptr<worker> weak = w.self;
  w.channel->request(type, std::move(body), w.spec.call_timeout,
                     [this, weak, done = std::move(done), env = w.spec.env](
                         result<ipc::message> r) {
                       if (auto wp = weak.lock(); wp && r) report_models(env, r->body);
                       done(r ? result<json>(std::move(r->body)) : result<json>(r.err()));
                     });
}

std::size_t supervisor::free_memory(bool unload_models, bool drop_caches,
                                    std::function<void(const std::string&, result<json>)> done) {
  std::size_t sent = 0;
  for (auto& [env, w] : workers_) {
    if (w->info.state != worker_state::ready) continue;
    ++sent;
    request_release(*w, ipc::message_type::free_memory,
                    {{"unload_models", unload_models}, {"free_memory", drop_caches}},
                    [done, name = env](result<json> r) { done(name, std::move(r)); });
  }
  return sent;
}

void supervisor::evict(const std::string& env, std::uint64_t bytes, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end() || it->second->info.state != worker_state::ready) {
    return done(error{"not_ready", "no ready worker runs env " + env});
  }
  request_release(*it->second, ipc::message_type::evict, {{"bytes", bytes}}, std::move(done));
}

std::optional<int> supervisor::release_process(worker& w, std::chrono::milliseconds grace) noexcept {
  if (w.channel) {
    w.channel->close("worker lost");
    w.channel.reset();
  }
  w.fd_socket.reset();
  std::optional<int> status;
  if (w.info.pid > 0) {
    // A grace only for a worker that went away on its own: its exit status may say why.
    if (grace.count() == 0) ::kill(-w.info.pid, SIGKILL);
    status = reap_worker(w.info.pid, grace);
    spdlog::info("worker {}: pid {} {}", w.spec.env, w.info.pid, describe_exit(*status));
    w.info.pid = -1;
  }
  // Its models are gone with it, and its replacement is reported anew.
  try {
    divergence_.on_worker_replaced(w.spec.env);
    if (on_models) on_models(w.spec.env, json::array(), 0);
  } catch (const std::exception& e) {
    spdlog::error("worker {}: dropping its stand-ins failed: {}", w.spec.env, e.what());
  }
  if (w.has_slot) {
    // The process is gone: its budget slot and leases can be reclaimed exactly (§4.3, §4.2).
    const auto bytes = memory_.control().reclaim_slot(w.info.slot);
    const auto leases = memory_.leases().release_process(w.info.slot);
    spdlog::info("worker {}: reclaimed {} pinned bytes and {} leases of slot {}", w.spec.env, bytes,
                 leases, w.info.slot);
    w.has_slot = false;
  }
  return status;
}

void supervisor::lose(worker& w, std::uint32_t generation, const std::string& reason,
                      bool peer_gone) {
  if (w.info.generation != generation) return;
  const auto state = w.info.state;
  if (state == worker_state::stopping || state == worker_state::stopped) {
    w.answered_shutdown = true;
    return;
  }
  if (state != worker_state::starting && state != worker_state::ready) return;
  w.timer.cancel();
  const bool was_ready = state == worker_state::ready;
  w.info.state = worker_state::backoff;  // set first: closing the channel re-enters lose()
  const std::string what = "worker for env " + w.spec.env + " (pid " + std::to_string(w.info.pid) +
                           ", generation " + std::to_string(generation) + ") " + reason;
  if (was_ready || w.info.last_error.empty() ||
      w.info.last_error.find(reason) == std::string::npos) {
    w.info.last_error = what;
  }
  const pid_t pid = w.info.pid;
  const auto status = release_process(
      w, !was_ready && peer_gone ? exit_status_grace : std::chrono::milliseconds(0));
  if (!was_ready && w.setup_failure.empty() && status) {
    if (auto cause = unrecoverable_exit(*status)) w.setup_failure = *cause;
  }
  w.info.losses += 1;
  spdlog::warn("{}", what);
  if (w.in_flight) {
    auto call = std::move(w.in_flight);
    call->done(error{"worker_died", what});
  }
  if (!was_ready && !w.setup_failure.empty() && !shutting_down_) {
    // A set-up that cannot succeed on a retry: no restart, and the cause is what is kept.
    w.info.last_error = "worker for env " + w.spec.env + " (" +
                        (pid > 0 ? "pid " + std::to_string(pid) + ", " : std::string()) +
                        "generation " + std::to_string(generation) + ") cannot start: " +
                        w.setup_failure + "; not restarted (a retry cannot succeed)";
    spdlog::error("{}", w.info.last_error);
    w.info.state = worker_state::failed;
    fail_queue(w);
    return;
  }
  const auto now = clock::now();
  w.losses.push_back(now);
  while (!w.losses.empty() && now - w.losses.front() > options_.timing.crash_loop_window) {
    w.losses.pop_front();
  }
  if (shutting_down_ || static_cast<int>(w.losses.size()) > options_.timing.crash_loop_limit) {
    w.info.state = worker_state::failed;
    if (!shutting_down_) {
      spdlog::error(
          "env {} marked failed: {} losses within {} ms (crash-loop cap {}); other "
          "envs go on. Last: {}",
          w.spec.env, w.losses.size(), options_.timing.crash_loop_window.count(),
          options_.timing.crash_loop_limit, w.info.last_error);
    }
    fail_queue(w);
    return;
  }
  auto delay = options_.timing.restart_backoff;
  for (std::size_t i = 1; i < w.losses.size() && delay < options_.timing.restart_backoff_max; ++i) {
    delay *= 2;
  }
  delay = std::min(delay, options_.timing.restart_backoff_max);
  spdlog::info("worker {}: restarting in {} ms", w.spec.env, delay.count());
  std::weak_ptr<worker> weak = w.self;
  w.timer.expires_after(delay);
  w.timer.async_wait([this, weak](const boost::system::error_code& ec) {
    auto wp = weak.lock();
    if (ec || !wp || wp->info.state != worker_state::backoff || shutting_down_) return;
    spawn(*wp);
  });
}

void supervisor::fail_queue(worker& w) {
  auto queue = std::move(w.queue);
  w.queue.clear();
  for (auto& q : queue)
    q.done(error{"pack_failed", "env " + w.spec.env + " failed: " + w.info.last_error});
  if (on_state) on_state(w.info);
}

void supervisor::call(const std::string& env, json body, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end()) {
    return done(error{"unknown_env", "no worker runs env " + env});
  }
  worker& w = *it->second;
  if (w.info.state == worker_state::failed || w.info.state == worker_state::stopped ||
      w.info.state == worker_state::stopping) {
    return done(error{"pack_failed",
                      "env " + env + " is " + to_string(w.info.state) + ": " + w.info.last_error});
  }
  w.queue.push_back({std::move(body), std::move(done)});
  dispatch(w);
}

void supervisor::dispatch(worker& w) {
  if (w.info.state != worker_state::ready || w.in_flight || w.queue.empty()) return;
  w.in_flight = std::make_unique<queued_call>(std::move(w.queue.front()));
  w.queue.pop_front();
  const std::uint32_t generation = w.info.generation;
  std::weak_ptr<worker> weak = w.self;
  w.channel->request(ipc::message_type::call, w.in_flight->body, w.spec.call_timeout,
                     [this, weak, generation](result<ipc::message> r) {
                       auto wp = weak.lock();
                       if (!wp || wp->info.generation != generation || !wp->in_flight) return;
                       if (!r && r.err().code == ipc::channel_errc::deadline_exceeded) {
                         // The worker's state is unknown after a call it never finished.
                         auto call = std::move(wp->in_flight);
                         lose(*wp, generation, "did not answer a call within its deadline");
                         call->done(r.err());
                         return;
                       }
                       if (!r && r.err().code == ipc::channel_errc::peer_lost) {
                         return;  // lose() answers the call with worker_died
                       }
                       auto call = std::move(wp->in_flight);
                       if (r) {
                         report_models(wp->spec.env, r->body);
                         call->done(std::move(r->body));
                       } else {
                         call->done(r.err());
                       }
                       dispatch(*wp);
                     });
}

void supervisor::ping(const std::string& env, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end() || it->second->info.state != worker_state::ready) {
    return done(error{"not_ready", "no ready worker runs env " + env});
  }
  it->second->channel->request(ipc::message_type::ping, json::object(), std::chrono::seconds(10),
                               [done](result<ipc::message> r) {
                                 if (r) return done(std::move(r->body));
                                 done(r.err());
                               });
}

void supervisor::interrupt(std::uint64_t epoch) {
  for (auto& [env, w] : workers_) {
    if (w->info.state == worker_state::ready) {
      w->channel->notify(ipc::message_type::interrupt, {{"epoch", epoch}});
    }
  }
}

void supervisor::arm_heartbeat_check() {
  heartbeat_timer_.expires_after(options_.timing.heartbeat_interval);
  heartbeat_timer_.async_wait(
      [this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;
        check_heartbeats();
        arm_heartbeat_check();
      });
}

void supervisor::check_heartbeats() {
  const auto now = clock::now();
  for (auto& [env, wptr] : workers_) {
    worker& w = *wptr;
    if (w.info.state != worker_state::ready) continue;
    const auto beat =
        memory_.control().block(w.info.slot).heartbeat.load(std::memory_order_acquire);
    if (beat != w.last_beat) {
      w.last_beat = beat;
      w.last_beat_at = now;
      continue;
    }
    if (now - w.last_beat_at >= missed_beats_for_hung * options_.timing.heartbeat_interval) {
      lose(w, w.info.generation,
           "stopped beating for " +
               std::to_string(
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_beat_at)
                       .count()) +
               " ms: hung, killed and replaced");
    }
  }
}

void supervisor::begin_shutdown(std::chrono::milliseconds grace) {
  shutting_down_ = true;
  heartbeat_timer_.cancel();
  for (auto& [env, wptr] : workers_) {
    worker& w = *wptr;
    w.timer.cancel();
    for (auto& q : w.queue) q.done(error{"shutting_down", "the host is shutting down"});
    w.queue.clear();
    if (!w.channel) {
      w.answered_shutdown = true;
      if (w.info.state == worker_state::backoff) w.info.state = worker_state::stopped;
      continue;
    }
    w.info.state = worker_state::stopping;
    std::weak_ptr<worker> weak = w.self;
    w.channel->request(ipc::message_type::shutdown, json::object(), grace,
                       [weak](result<ipc::message>) {
                         auto wp = weak.lock();
                         if (!wp) return;
                         wp->answered_shutdown = true;
                         if (wp->channel) wp->channel->close("shutdown");
                       });
  }
}

bool supervisor::shutdown_answered() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const auto& kv) { return kv.second->answered_shutdown; });
}

void supervisor::finish_shutdown(std::chrono::milliseconds grace) noexcept {
  shutting_down_ = true;
  const auto end = clock::now() + grace;
  for (auto& [env, wptr] : workers_) {
    worker& w = *wptr;
    w.timer.cancel();
    if (w.channel) {
      w.channel->close("shutdown");
      w.channel.reset();
    }
    w.fd_socket.reset();
    if (w.info.pid > 0) {
      const auto left =
          std::max(std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now()),
                   std::chrono::milliseconds(0));
      const int status = reap_worker(w.info.pid, left);
      spdlog::info("worker {}: pid {} {}", w.spec.env, w.info.pid, describe_exit(status));
      w.info.pid = -1;
    }
    if (w.has_slot) {
      memory_.control().reclaim_slot(w.info.slot);
      memory_.leases().release_process(w.info.slot);
      w.has_slot = false;
    }
    if (w.in_flight) {
      auto call = std::move(w.in_flight);
      call->done(error{"shutting_down", "the host is shutting down"});
    }
    for (auto& q : w.queue) q.done(error{"shutting_down", "the host is shutting down"});
    w.queue.clear();
    if (w.info.state != worker_state::failed) w.info.state = worker_state::stopped;
  }
}

std::vector<worker_info> supervisor::workers() const {
  std::vector<worker_info> out;
  for (const auto& [env, w] : workers_) out.push_back(w->info);
  return out;
}

const worker_info* supervisor::find(const std::string& env) const {
  auto it = workers_.find(env);
  return it == workers_.end() ? nullptr : &it->second->info;
}

bool supervisor::settled() const {
  return std::none_of(workers_.begin(), workers_.end(), [](const auto& kv) {
    const auto s = kv.second->info.state;
    return s == worker_state::starting || s == worker_state::backoff;
  });
}

}  // namespace orch::orchestrator
