// supervisor: spawns, watches and restarts one worker per env, and routes node calls to them
// (docs/runtime.md, "Supervision" and "Router"; docs/references.md, comfy-env §1.9 to §1.12 on
// where comfy-env's restarts fall short, and anchors §3.1/§3.2 on Ray's pool).
//
//   spawn      fork/exec with PR_SET_PDEATHSIG and a process group (child_process.hpp, through
//              supervisor_options::launcher, process_launcher.hpp), a fresh
//              generation and startup token, a control slot, the segment fds on the fd socket;
//   handshake  hello (token and generation checked) -> settings; ready -> node classes; all
//              within [workers] handshake_timeout, else a start failure that names the env;
//   liveness   the heartbeat counter of the worker's control block, read without a message; no
//              beat for 3 heartbeat intervals means hung: the worker is killed and replaced;
//   loss       the call in flight fails at once with "worker_died" (never a hang), the budget
//              slot is reclaimed to the byte, the dead process's leases are dropped (outputs
//              others hold stay valid), and the worker restarts after a doubling backoff;
//   crash loop more than crash_loop_limit losses within crash_loop_window mark that env failed:
//              its queued calls fail with "pack_failed" and the other envs go on; it is started
//              again after failed_retry, doubled per further crash loop up to an hour
//              (crash_loop_cool_down); these decisions are the restart_policy's
//              (restart_policy.hpp);
//   no retry   a start that cannot succeed on a retry marks the env failed at its first loss:
//              the worker executable cannot be exec'd, the worker said setup_failed (a library
//              that is no pack, a plugin that does not load), or it exited while starting with
//              ORCH_WORKER_EXIT_USAGE, ORCH_WORKER_EXIT_SETUP or 127; last_error keeps the cause;
//   fence      every frame carries the generation; the channel drops other generations, and
//              handlers of a replaced generation are ignored;
//   router     one call in flight per worker, the rest queued in order; every call has a
//              deadline ([options] call_timeout or [workers] call_timeout); a call past it kills
//              the worker (its state is unknown) and fails with "deadline_exceeded";
//   lane       a call from another thread may go on the worker's call lane instead, written and
//              answered on that thread while the router has nothing out (call_lane.hpp); the
//              rules above hold for it too.
//
// Threading: every member runs on the io_context's one thread (docs/runtime.md), but lane().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/plugins/applied_settings.hpp"
#include "orch/process/process_launcher.hpp"
#include "orch/process/worker_environment.hpp"
#include "orch/runtime/call_lane.hpp"
#include "orch/runtime/call_histogram.hpp"
#include "orch/runtime/divergence_report.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/plugin_selection.hpp"
#include "orch/runtime/restart_policy.hpp"
#include "orch/runtime/worker_output.hpp"
#include "orch/runtime/worker_web_sockets.hpp"
#include "orch/support/result.hpp"

namespace orch::runtime {

// How a Python env's worker starts (docs/python.md): its interpreter runs the comfy_orch
// package's worker over liborch_worker.so, importing the node directory.
struct python_worker_spec {
  std::filesystem::path interpreter;
  std::filesystem::path node_dir;  // <pack>/nodes[/<child>]: imported as a package
  std::filesystem::path pack_dir;  // the worker's cwd, first on its sys.path
  std::filesystem::path comfyui_root;  // [comfyui] root; empty: none (ahead of pack_dir)
  // A pixi env's pixi.toml and the pixi that runs it: the worker starts through `pixi run`, so
  // pixi's activation ([activation.env], PATH, CONDA_PREFIX) applies. Empty: started directly.
  std::filesystem::path pixi_manifest;
  std::filesystem::path pixi;
};

struct worker_spec {
  std::string env;
  std::filesystem::path library;  // a native pack's node library; empty for a Python pack
  std::optional<python_worker_spec> python;
  std::vector<std::pair<std::string, std::string>> env_vars;  // the pack's [env_vars]
  std::chrono::milliseconds call_timeout{600'000};
  worker_plugin_choice plugins;  // chosen at the host's level (memory_plan::choose_for)
  // The worker's device: the pack's [worker] device (cpu, or the host's kind), else the host's.
  manifests::device_spec device;
  std::string backend_plugin;            // that device's backend plugin; empty: none
  plugins::host_memory_settings memory;  // the host's settings as that device takes them
};

struct supervisor_options {
  std::string worker_executable;
  std::filesystem::path worker_library;       // liborch_worker.so, for Python workers
  std::filesystem::path python_package_root;  // the directory holding comfy_orch/
  manifests::worker_settings timing;
  plugins::manager_choice host_manager;  // exported as ORCH_WORKER_PAGER where absent
  process::environment operator_env;
  bool debug_worker = false;  // ORCH_DEBUG_WORKER: the routine divergence line
  // Starts, signals and reaps the workers (process_launcher.hpp); null: real child processes
  // (child_process_launcher). Unit tests pass a fake that runs in-process workers.
  std::shared_ptr<process::process_launcher> launcher;
  // The time of spawns, ready messages and losses, as the restart policy reads it; empty: the
  // steady clock. A test may drive it by hand; the supervisor's timers still run on real time.
  time_source clock;
};

enum class worker_state { starting, ready, backoff, failed, stopping, stopped };
const char* to_string(worker_state state) noexcept;

struct worker_info {
  std::string env;
  worker_state state = worker_state::starting;
  pid_t pid = -1;
  std::uint32_t generation = 0;
  std::uint32_t slot = 0;
  int losses = 0;          // every loss so far
  std::string last_error;  // the last loss or start failure, complete on its own
  nlohmann::json nodes = nlohmann::json::array();  // from ready
  nlohmann::json plugins = nlohmann::json::object();  // from ready: manager, reason, plugins
  std::string manager;         // "pager" or "ledger", as the worker resolved it
  std::string manager_reason;  // the worker's own reason
  bool settings_match = true;  // the worker's applied-settings hash is the one the host expects
  bool divergence_acknowledged = false;  // ORCH_DIVERGENCE_ACK is on for this env
  std::chrono::steady_clock::time_point spawned_at;  // this generation's spawn
  std::chrono::steady_clock::time_point ready_at;    // and its ready message
  // Failed for a crash loop: when it is started again (crash_loop_cool_down), and how many
  // crash loops in a row failed it.
  std::optional<std::chrono::steady_clock::time_point> retry_at;
  int crash_loops = 0;
  // Where a Python worker serves its pack's aiohttp routes (worker_web_sockets.hpp); empty for a
  // native worker. The same path for every generation of the env.
  std::filesystem::path web_socket;
};

// A finished call: the worker's response body, or a typed error ("worker_died",
// "deadline_exceeded", "pack_failed", "unknown_env", "bad_response", a channel error). A call's
// body has been checked against docs/protocol.md (ipc::check_call_response) before it is
// delivered, and before its models report is applied.
using call_done = std::function<void(result<nlohmann::json>)>;

class supervisor {
 public:
  supervisor(boost::asio::io_context& io, host_memory& memory, supervisor_options options);
  supervisor(const supervisor&) = delete;
  supervisor& operator=(const supervisor&) = delete;
  ~supervisor();  // SIGKILLs and reaps whatever is still running

  void start(worker_spec spec);
  void call(const std::string& env, nlohmann::json body, call_done done);
  // A ping on the worker's channel, bypassing the router queue: the raw round trip.
  void ping(const std::string& env, call_done done);
  void interrupt(std::uint64_t epoch);
  // Graceful: asks each worker to shut down; workers exit when the host closes their channel.
  void begin_shutdown(std::chrono::milliseconds grace);
  // SIGKILLs every worker that is inside a call (a node that ignores interrupts, when stopping
  // must not wait for its deadline): the calls fail as worker_died. Returns how many.
  std::size_t kill_busy(const std::string& why);
  bool shutdown_answered() const;  // every worker answered or its channel is gone
  // Forced: reaps every worker, SIGKILLing those still alive after `grace`.
  void finish_shutdown(std::chrono::milliseconds grace) noexcept;

  std::vector<worker_info> workers() const;
  const worker_info* find(const std::string& env) const;
  // Node call durations per env, from the request sent to its answer, across restarts, on
  // either path.
  std::map<std::string, call_histogram> call_durations() const;
  // The call lane of `env` (call_lane.hpp), null for an env never started. Any thread.
  std::shared_ptr<call_lane> lane(const std::string& env) const;
  const worker_spec* spec_of(const std::string& env) const;  // what the env's worker was given
  bool settled() const;  // no worker is starting or backing off

  std::function<void(const std::string& env, const nlohmann::json& progress)> on_progress;
  // A message for ComfyUI's clients from env's worker, checked (ui_messages.hpp).
  std::function<void(const std::string& env, const nlohmann::json& message)> on_ui_message;
  std::function<void(const worker_info& info)> on_state;  // ready, failed
  // A worker's models (key, size, resident) with the report's sequence number: after every call
  // and every receipt (the host's stand-ins). A lost worker reports an empty list.
  std::function<void(const std::string& env, const nlohmann::json& models, std::uint64_t seq)>
      on_models;

  // The host's releases (docs/memory-semantics.md): free to every ready worker, evict to one.
  // Each answer is the worker's receipt {freed, resident, sequence, models}.
  // Returns how many workers were asked (each answers `done` exactly once).
  // The envs whose worker is inside a call now.
  std::set<std::string> busy_envs() const;
  std::size_t free_memory(bool unload_models, bool drop_caches,
                   std::function<void(const std::string& env, result<nlohmann::json>)> done);
  void evict(const std::string& env, std::uint64_t bytes, call_done done);
  // The device bytes a failed call's model needed (its error's `required`, sent with type
  // out_of_memory), or 0: the call is worth retrying once that much is freed through the
  // stand-ins (docs/memory-semantics.md). `response` passed ipc::check_call_response.
  static std::uint64_t device_bytes_required(const nlohmann::json& response);
  // The lease hand-over of a call's response from `env` (checked by ipc::check_call_response):
  // the blocks it returned as outputs become the host's, every block it allocated for the call is
  // released from the worker. Returns the blocks the host now holds.
  std::vector<ipc::buffer_descriptor> hand_over_outputs(const std::string& env,
                                                        const nlohmann::json& response);

 private:
  struct queued_call {
    nlohmann::json body;
    call_done done;
  };
  struct worker {
    worker(boost::asio::io_context& io, restart_policy p) : timer(io), policy(std::move(p)) {}
    // Handlers queued on the io context (channel callbacks) may run after the supervisor is
    // gone; they hold this weak reference, never a raw pointer.
    std::weak_ptr<worker> self;
    worker_spec spec;
    worker_info info;
    std::string token;
    std::shared_ptr<ipc::channel> channel;
    ipc::unique_fd fd_socket;
    std::shared_ptr<worker_output> output;  // its stdout and stderr
    boost::asio::steady_timer timer;  // handshake deadline, then restart backoff
    bool has_slot = false;
    std::uint64_t last_beat = 0;
    std::chrono::steady_clock::time_point last_beat_at;
    std::deque<queued_call> queue;
    std::unique_ptr<queued_call> in_flight;
    std::shared_ptr<call_lane> lane;
    // This generation's host end of its lane, until its ready opens the lane.
    std::unique_ptr<ipc::lane_endpoint> lane_end;
    restart_policy policy;  // what its losses lead to
    // Why this generation's start cannot succeed on a retry (an exec failure, the worker's
    // setup_failed, an exit status); empty: a loss like any other.
    std::string setup_failure;
    bool answered_shutdown = false;
    std::string web_name;  // its socket's name in web_sockets_
    bool said_bad_ui_message = false;  // this generation's
  };

  void spawn(worker& w);
  // The ORCH_WORKER_INSTANCE of `w`'s `generation` (leftover_processes.hpp).
  std::string instance_of(const worker& w, std::uint32_t generation) const;
  void on_message(worker& w, std::uint32_t generation, ipc::message m);
  void on_hello(worker& w, const ipc::message& m);
  void on_ready(worker& w, const ipc::message& m);
  void on_setup_failed(worker& w, const ipc::message& m);
  void on_allocate(worker& w, const ipc::message& m);       // the lease service
  void on_lease_message(worker& w, const ipc::message& m);  // lease_free, lease_release
  void on_pinned_grant(worker& w, const ipc::message& m);
  void on_ui_message_from(worker& w, const nlohmann::json& body);
  // `peer_gone`: the worker closed its channel (or its socket) itself, so while it was starting
  // its exit status is waited for briefly and may mark the start as one a retry cannot fix.
  void lose(worker& w, std::uint32_t generation, const std::string& reason,
            bool peer_gone = false);
  // What follows a loss: the env failed at once for a start a retry cannot fix (setup_failure);
  // the restart_policy's restart after a backoff; or its failure for a crash loop or shutdown.
  void fail_unrecoverable(worker& w, pid_t pid, std::uint32_t generation);
  void restart_after(worker& w, std::chrono::milliseconds delay);
  void fail_for_losses(worker& w, const restart_decision& decision);
  // Closes the channel and reaps the process (SIGKILL at once, or after `grace`); returns its wait
  // status, if there was a process.
  std::optional<int> release_process(worker& w, std::chrono::milliseconds grace) noexcept;
  void fail_queue(worker& w);  // a failed env: its queued calls get pack_failed; on_state
  void dispatch(worker& w);
  void arm_heartbeat_check();
  void check_heartbeats();
  nlohmann::json handshake_for(const worker& w) const;
  void report_models(const std::string& env, const nlohmann::json& body);
  // `env`'s call lane, registered for lane(); and what it asks of the io thread.
  std::shared_ptr<call_lane> make_lane(const std::string& env);
  call_lane::handlers lane_handlers(const std::string& env);
  // Sends a free_memory or evict request to `w`; `done` gets its receipt.
  void request_release(worker& w, ipc::message_type type, nlohmann::json body, call_done done);
  void report_divergence(worker& w);

  boost::asio::io_context& io_;
  host_memory& memory_;
  supervisor_options options_;
  std::map<std::string, std::shared_ptr<worker>> workers_;
  // Output readers of replaced generations, until their pipes close (what a dead worker left
  // behind may still write).
  std::vector<std::shared_ptr<worker_output>> retired_outputs_;
  // This supervisor's mark on its workers' environment (leftover_processes.hpp).
  std::string instance_;
  std::map<std::string, call_histogram> call_durations_;
  // Every env's lane, for threads other than the io thread: filled by start() on the io thread.
  mutable std::mutex lanes_mutex_;
  std::map<std::string, std::shared_ptr<call_lane>> lanes_;
  boost::asio::steady_timer heartbeat_timer_;
  // Expires with the supervisor: a heartbeat tick already queued when it is destroyed sees it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool shutting_down_ = false;
  divergence_reporter divergence_;
  worker_web_sockets web_sockets_;
};

}  // namespace orch::runtime
