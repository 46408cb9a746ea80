// host_source: where the gateway's hosts come from (docs/fleet.md, "The gateway"). Each source
// delivers host_up (a host's name and where its HTTP listens) and host_down (with why) on the
// gateway's io thread: the [[host]] list, or the Ray driver (comfy_orch.fleet.driver), which
// has Ray place and restart one `comfy-orch serve` a host and says so in JSON lines. Whether a
// host that is up answers is the gateway's own check (gateway_api.hpp): a host that stops
// answering is down until it answers again, whichever source named it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "orch/support/result.hpp"

#include "orch/gateway/fleet_config.hpp"

namespace orch::gateway {

struct host_event {
  enum class kind { up, down };
  kind what = kind::up;
  std::string host;  // its name in the fleet ("host-0")
  std::string address;
  std::uint16_t port = 0;
  std::string reason;  // host_down: why
  long pid = 0;        // host_up from Ray: serve's process id on its node (0: not known)
};

class host_source {
 public:
  using event_handler = std::function<void(const host_event&)>;
  virtual ~host_source() = default;
  // Starts delivering events to `on_event`, on `io`'s thread. Errors: driver_failed (the Ray
  // driver could not be started).
  virtual status start(boost::asio::io_context& io, event_handler on_event) = 0;
  // Stops delivering; idempotent. Not on the io thread.
  virtual void stop() = 0;
};

// The [[host]] list: hosts already running at fixed addresses, named host-0, host-1, ... in the
// order written, each up from the start.
class static_host_source final : public host_source {
 public:
  explicit static_host_source(std::vector<static_host> hosts) : hosts_(std::move(hosts)) {}
  status start(boost::asio::io_context& io, event_handler on_event) override;
  void stop() override {}

 private:
  std::vector<static_host> hosts_;
};

// The Ray driver as a child: `<python> -m comfy_orch.fleet.driver --ray-address A --hosts N
// --deployment D --comfy-orch C [--secret-file S] [--resource R]`, in a process group of its
// own (posix_spawn: the one spawner, child_process.hpp, gives a child no stdin of its own, and
// the driver's lifeline is its stdin: it stops at end of file, so it stops when the gateway
// dies however it dies). Its stdout is read a line at a time, each line at most
// `max_line_bytes` (a longer one is dropped with a warning), each a JSON event: host_up
// {"host", "url", ...}, host_down {"host", "reason"}, error {"message"} (fatal: the driver exits
// 1); its stderr goes to the log.
//
// A driver that exits on its own (its Ray head went away, it failed) is reaped at once, each
// host it had said up is reported down (its actors ended with it), and it is started again
// after `first_restart`, doubling to 30 s while it keeps failing within a minute: the hosts come
// back when Ray does, and the gateway, its queue and its clients never stop. stop() closes the
// running driver's stdin, waits `stop_grace` for it to stop its hosts and exit, then kills its
// group, and reaps it.
class ray_host_source final : public host_source {
 public:
  static constexpr std::size_t max_line_bytes = std::size_t{64} << 10;
  static constexpr std::chrono::seconds longest_restart{30};

  ray_host_source(ray_hosts ray, std::optional<std::filesystem::path> secret_file,
                  std::chrono::milliseconds stop_grace = std::chrono::seconds(20),
                  std::chrono::milliseconds first_restart = std::chrono::seconds(1))
      : ray_(std::move(ray)),
        secret_file_(std::move(secret_file)),
        stop_grace_(stop_grace),
        first_restart_(first_restart) {}
  ~ray_host_source() override { stop(); }

  status start(boost::asio::io_context& io, event_handler on_event) override;
  void stop() override;

  // The driver's command line (argv[0] the interpreter).
  std::vector<std::string> command() const;

 private:
  struct driver_run {
    pid_t pid = 0;
    int stdin_fd = -1;  // the write end of its stdin
    int out_fd = -1;    // the read ends of its stdout and stderr
    int err_fd = -1;
  };
  result<driver_run> spawn() const;
  // Runs on its own thread from start() to stop(): reads each run of the driver, reaps it,
  // and starts the next.
  void supervise(driver_run run, boost::asio::io_context& io, const event_handler& on_event);
  // Reads one run's stdout until its end (or stop), delivering its events; `up` keeps the hosts
  // it says are up.
  void read_events(int fd, boost::asio::io_context& io, const event_handler& on_event,
                   std::set<std::string>& up);
  // Waits for the run to exit, then makes sure of what it left in its group; its wait status.
  int reap(const driver_run& run, std::thread& log);
  // Sleeps `d`, or less when stop() is called; false then.
  bool pause(std::chrono::milliseconds d);

  ray_hosts ray_;
  std::optional<std::filesystem::path> secret_file_;
  std::chrono::milliseconds stop_grace_;
  std::chrono::milliseconds first_restart_;
  std::mutex mutex_;  // guards the running driver's pid and stdin, and done_
  std::condition_variable changed_;
  pid_t pid_ = 0;
  int stdin_fd_ = -1;
  bool done_ = false;                        // the supervisor has reaped its last run
  std::atomic<bool> stop_requested_{false};  // the driver's end is expected
  std::atomic<bool> stopping_{false};        // the readers stop, its output or not
  std::thread supervisor_;
};

// One JSON line of the driver as a host event; nullopt for a line that is none (`why` says what
// it was: an error event's message, or what is wrong with the line).
std::optional<host_event> driver_event(const std::string& line, std::string& why);

}  // namespace orch::gateway
