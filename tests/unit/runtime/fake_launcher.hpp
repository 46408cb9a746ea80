// fake_launcher: a process_launcher that runs a fake_worker on a thread for each spawn instead
// of forking (STYLE.md: Ray's raylet tests its worker pool with a fake process launcher). Its
// pids start above the kernel's PID_MAX_LIMIT (2^22), so no pid it hands out can name a real
// process, and it never calls kill(2): a signal "kills" the fake worker where it is.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fake_worker.hpp"
#include "orch/process/process_launcher.hpp"

namespace orch::runtime_testing {

class fake_launcher final : public process::process_launcher {
 public:
  // The script of each start, by env and generation (1 for the first start).
  using script_source = std::function<fake_worker_script(const std::string& env,
                                                         std::uint32_t generation)>;
  struct spawn_record {
    pid_t pid = -1;
    std::string env;
    std::uint32_t generation = 0;
    std::chrono::steady_clock::time_point at;
  };
  struct signal_record {
    pid_t pid = -1;
    int signal = 0;
  };

  static constexpr pid_t first_pid = 1 << 30;  // above any pid_max (PID_MAX_LIMIT is 2^22)

  explicit fake_launcher(script_source scripts);
  ~fake_launcher() override;  // ends and joins every fake worker not reaped

  result<pid_t> spawn(const process::spawn_request& request) override;
  void signal_group(pid_t pid, int signal) noexcept override;
  int reap(pid_t pid, std::chrono::milliseconds grace) noexcept override;
  std::optional<int> try_reap(pid_t pid) noexcept override;
  result<ipc::process_identity> identity(pid_t pid) override;

  // The next spawn fails with `e` (an "exec_failed" cannot succeed on a retry).
  void fail_next_spawn(error e);
  // What happened so far, in order (any thread).
  std::vector<spawn_record> spawns() const;
  std::vector<signal_record> signals() const;
  std::map<pid_t, int> reaped() const;  // pid -> wait status
  std::size_t running() const;          // spawned and not reaped
  const std::shared_ptr<fake_journal>& journal() const noexcept { return journal_; }

 private:
  // Takes `pid`'s worker out of the table; null when unknown or reaped.
  std::unique_ptr<fake_worker> take(pid_t pid);
  int note_reaped(pid_t pid, int status);

  script_source scripts_;
  std::shared_ptr<fake_journal> journal_ = std::make_shared<fake_journal>();
  mutable std::mutex mutex_;
  pid_t next_pid_ = first_pid;
  std::optional<error> next_failure_;
  std::map<pid_t, std::unique_ptr<fake_worker>> workers_;
  std::vector<spawn_record> spawns_;
  std::vector<signal_record> signals_;
  std::map<pid_t, int> reaped_;
};

}  // namespace orch::runtime_testing
