// The supervisor's state machine (docs/runtime.md): a worker's messages sorted to their service,
// its loss and restart with backoff, heartbeats and shutdown. The other parts of the supervisor
// each have their file (docs/architecture.md): starting a worker (supervisor_spawn.cpp), the
// router (supervisor_router.cpp), the lease service (supervisor_leases.cpp) and release mirroring
// (supervisor_releases.cpp); whether a loss restarts or fails the env is restart_policy.cpp's.
#include "orch/runtime/supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "orch/ipc/fd_passing.hpp"
#include "orch/runtime/ui_messages.hpp"
#include "orch/ipc/process_identity.hpp"
#include "orch/process/adopted_children.hpp"
#include "orch/process/child_process.hpp"
#include "orch/process/child_process_launcher.hpp"
#include "orch/process/leftover_processes.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::runtime {

namespace {

using nlohmann::json;
using clock = std::chrono::steady_clock;
constexpr int missed_beats_for_hung = 3;
// How long a worker that closed its channel while starting is given to exit on its own, so its
// exit status can be read (it is exiting already; a live one is SIGKILLed after this).
constexpr std::chrono::milliseconds exit_status_grace{250};


// The exit statuses of a worker that stopped while starting and cannot do better on a retry
// (child_process.hpp): its command line was refused, its set-up failed, or a wrapper found no command.
std::optional<std::string> unrecoverable_exit(int status) {
  if (!WIFEXITED(status)) return std::nullopt;
  switch (WEXITSTATUS(status)) {
    case process::worker_exit_usage:
      return "it exited with 64 (ORCH_WORKER_EXIT_USAGE: its command line was refused; is "
             "ORCH_WORKER_EXECUTABLE a comfy-orch-worker of this build?)";
    case process::worker_exit_setup:
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
  if (!options_.launcher) options_.launcher = std::make_shared<process::child_process_launcher>();
  if (!options_.clock) options_.clock = &clock::now;
  instance_ = process::new_host_instance();
  arm_heartbeat_check();
}

supervisor::~supervisor() {
  heartbeat_timer_.cancel();
  finish_shutdown(std::chrono::milliseconds(0));
}

void supervisor::start(worker_spec spec) {
  auto w = std::make_shared<worker>(io_, restart_policy(options_.timing, options_.clock));
  w->self = w;
  w->info.env = spec.env;
  w->web_name = std::to_string(workers_.size());  // short: a socket path has 107 bytes
  w->spec = std::move(spec);
  w->lane = make_lane(w->spec.env);
  worker& ref = *w;
  workers_[ref.spec.env] = std::move(w);
  spawn(ref);
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
    case ipc::message_type::allocate:
      return on_allocate(w, m);
    case ipc::message_type::lease_free:
    case ipc::message_type::lease_release:
      return on_lease_message(w, m);
    case ipc::message_type::progress:
      if (on_progress) on_progress(w.spec.env, m.body);
      return;
    case ipc::message_type::ui_message:
      return on_ui_message_from(w, m.body);
    case ipc::message_type::ping:
      return w.channel->respond(m.header, json::object());
    case ipc::message_type::pinned_grant:
      return on_pinned_grant(w, m);
    default:
      if (m.header.request_id != 0) {
        w.channel->respond_error(
            m.header, {ipc::body_errc::unknown_type, "the host does not serve this message type"});
      }
  }
}

void supervisor::on_ui_message_from(worker& w, const json& body) {
  auto message = checked_ui_message(body);
  if (!message) {
    // Said once per generation: a pack that sends them in a loop does not flood the log.
    if (!w.said_bad_ui_message)
      spdlog::warn("worker {}: a message for ComfyUI's clients was dropped: {}", w.spec.env,
                   message.err().message);
    w.said_bad_ui_message = true;
    return;
  }
  if (on_ui_message) on_ui_message(w.spec.env, *message);
}

std::string supervisor::instance_of(const worker& w, std::uint32_t generation) const {
  return instance_ + "/" + w.spec.env + "/" + std::to_string(generation) + "/";
}

std::optional<int> supervisor::release_process(worker& w, std::chrono::milliseconds grace) noexcept {
  if (w.channel) {
    w.channel->close("worker lost");
    w.channel.reset();
  }
  w.fd_socket.reset();
  w.lane_end.reset();
  std::optional<int> status;
  if (w.info.pid > 0) {
    // A grace only for a worker that went away on its own: its exit status may say why.
    if (grace.count() == 0) options_.launcher->signal_group(w.info.pid, SIGKILL);
    status = options_.launcher->reap(w.info.pid, grace);
    spdlog::info("worker {}: pid {} {}", w.spec.env, w.info.pid, process::describe_exit(*status));
    w.info.pid = -1;
    try {
      if (const auto left = process::kill_marked_processes(instance_of(w, w.info.generation));
          left > 0)
        spdlog::info("worker {}: killed {} process(es) it left behind", w.spec.env, left);
    } catch (const std::exception& e) {
      spdlog::error("worker {}: what it left behind was not looked for: {}", w.spec.env, e.what());
    }
  }
  // Its models are gone with it, and its replacement is reported anew.
  try {
    divergence_.on_worker_replaced(w.spec.env);
    if (on_models) on_models(w.spec.env, json::array(), 0);
  } catch (const std::exception& e) {
    spdlog::error("worker {}: dropping its stand-ins failed: {}", w.spec.env, e.what());
  }
  if (w.has_slot) {
    // The process is gone: its slot and leases can be reclaimed exactly (docs/shared-memory.md).
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
    w.lane->close(generation, error{runtime_errc::shutting_down, "the host is shutting down"});
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
  // A call on the lane gets the loss as the router's call does (call_lane.hpp).
  w.lane->close(generation, error{runtime_errc::worker_died, what});
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
    call->done(error{runtime_errc::worker_died, what});
  }
  if (!was_ready && !w.setup_failure.empty() && !shutting_down_) {
    return fail_unrecoverable(w, pid, generation);
  }
  const auto decision = w.policy.lost(shutting_down_);
  if (decision.action == restart_action::restart) return restart_after(w, decision.delay);
  fail_for_losses(w, decision);
}

void supervisor::fail_unrecoverable(worker& w, pid_t pid, std::uint32_t generation) {
  // A set-up that cannot succeed on a retry: no restart, and the cause is what is kept.
  w.info.last_error = "worker for env " + w.spec.env + " (" +
                      (pid > 0 ? "pid " + std::to_string(pid) + ", " : std::string()) +
                      "generation " + std::to_string(generation) + ") cannot start: " +
                      w.setup_failure + "; not restarted (a retry cannot succeed)";
  spdlog::error("{}", w.info.last_error);
  w.info.state = worker_state::failed;
  fail_queue(w);
}

void supervisor::restart_after(worker& w, std::chrono::milliseconds delay) {
  spdlog::info("worker {}: restarting in {} ms", w.spec.env, delay.count());
  std::weak_ptr<worker> weak = w.self;
  w.timer.expires_after(delay);
  w.timer.async_wait([this, weak](const boost::system::error_code& ec) {
    auto wp = weak.lock();
    if (ec || !wp || wp->info.state != worker_state::backoff || shutting_down_) return;
    spawn(*wp);
  });
}

void supervisor::fail_for_losses(worker& w, const restart_decision& decision) {
  w.info.state = worker_state::failed;
  fail_queue(w);
  if (decision.action == restart_action::fail_for_shutdown) return;
  w.info.crash_loops = decision.crash_loops;
  const bool retried = decision.action == restart_action::fail_then_retry;
  spdlog::error(
      "env {} marked failed: {} losses within {} ms (crash-loop cap {}); other envs go on{}. "
      "Last: {}",
      w.spec.env, decision.losses_in_window, options_.timing.crash_loop_window.count(),
      options_.timing.crash_loop_limit,
      retried ? "; started again in " + std::to_string(decision.delay.count()) + " ms"
              : std::string(),
      w.info.last_error);
  if (!retried) return;
  std::weak_ptr<worker> weak = w.self;
  w.timer.expires_after(decision.delay);
  w.info.retry_at = decision.retry_at;
  w.timer.async_wait([this, weak](const boost::system::error_code& ec) {
    auto wp = weak.lock();
    if (ec || !wp || wp->info.state != worker_state::failed || shutting_down_) return;
    wp->info.retry_at.reset();
    wp->policy.cool_down_ended();
    spdlog::info("env {}: starting again after its crash loop", wp->spec.env);
    spawn(*wp);
  });
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
  process::reap_adopted();  // detached helpers that ended, re-parented to this process
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
    for (auto& q : w.queue) q.done(error{runtime_errc::shutting_down, "the host is shutting down"});
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

std::set<std::string> supervisor::busy_envs() const {
  std::set<std::string> out;
  for (const auto& [env, w] : workers_)
    if (w->in_flight || w->lane->busy()) out.insert(env);
  return out;
}

std::size_t supervisor::kill_busy(const std::string& why) {
  std::size_t killed = 0;
  for (auto& [env, w] : workers_) {
    if ((!w->in_flight && !w->lane->busy()) || w->info.pid <= 0) continue;
    spdlog::warn("worker {}: still inside a call {}; killed", env, why);
    // Its channel closes, and lose() fails the call, on either path.
    options_.launcher->signal_group(w->info.pid, SIGKILL);
    ++killed;
  }
  return killed;
}

void supervisor::finish_shutdown(std::chrono::milliseconds grace) noexcept {
  shutting_down_ = true;
  for (auto& o : retired_outputs_) o->drain_and_stop();
  retired_outputs_.clear();
  const auto end = clock::now() + grace;
  for (auto& [env, wptr] : workers_) {
    worker& w = *wptr;
    w.timer.cancel();
    w.lane->close(w.info.generation,
                  error{runtime_errc::shutting_down, "the host is shutting down"});
    if (w.channel) {
      w.channel->close("shutdown");
      w.channel.reset();
    }
    w.fd_socket.reset();
    w.lane_end.reset();
    if (w.info.pid > 0) {
      const auto left =
          std::max(std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now()),
                   std::chrono::milliseconds(0));
      const int status = options_.launcher->reap(w.info.pid, left);
      spdlog::info("worker {}: pid {} {}", w.spec.env, w.info.pid, process::describe_exit(status));
      w.info.pid = -1;
    }
    if (w.output) w.output->drain_and_stop();  // its last lines, then the pipe closes
  }
  // What any worker of this host left behind (a detached helper), whatever its generation.
  try {
    if (const auto left = process::kill_marked_processes(instance_ + "/"); left > 0)
      spdlog::info("killed {} process(es) workers left behind", left);
  } catch (const std::exception& e) {
    spdlog::error("what workers left behind was not looked for: {}", e.what());
  }
  // And what this process adopted (serve, run), the helpers that cleared their mark too.
  if (const auto adopted = process::end_adopted(); adopted > 0)
    spdlog::info("ended {} adopted process(es) workers had detached", adopted);
  for (auto& [env, wptr] : workers_) {
    worker& w = *wptr;
    if (w.has_slot) {
      memory_.control().reclaim_slot(w.info.slot);
      memory_.leases().release_process(w.info.slot);
      w.has_slot = false;
    }
    if (w.in_flight) {
      auto call = std::move(w.in_flight);
      call->done(error{runtime_errc::shutting_down, "the host is shutting down"});
    }
    for (auto& q : w.queue) q.done(error{runtime_errc::shutting_down, "the host is shutting down"});
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

const worker_spec* supervisor::spec_of(const std::string& env) const {
  auto it = workers_.find(env);
  return it == workers_.end() ? nullptr : &it->second->spec;
}

bool supervisor::settled() const {
  return std::none_of(workers_.begin(), workers_.end(), [](const auto& kv) {
    const auto s = kv.second->info.state;
    return s == worker_state::starting || s == worker_state::backoff;
  });
}

}  // namespace orch::runtime
