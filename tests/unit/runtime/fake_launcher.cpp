#include "fake_launcher.hpp"

#include <signal.h>

#include "orch/ipc/errc.hpp"

namespace orch::runtime_testing {

fake_launcher::fake_launcher(script_source scripts) : scripts_(std::move(scripts)) {}

fake_launcher::~fake_launcher() {
  std::map<pid_t, std::unique_ptr<fake_worker>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(workers_);
  }
  left.clear();  // each is killed and joined
}

result<pid_t> fake_launcher::spawn(const process::spawn_request& request) {
  std::string env, generation;
  for (std::size_t i = 0; i + 1 < request.args.size(); ++i) {
    if (request.args[i] == "--env") env = request.args[i + 1];
    if (request.args[i] == "--generation") generation = request.args[i + 1];
  }
  const auto gen = static_cast<std::uint32_t>(generation.empty() ? 0 : std::stoul(generation));
  std::lock_guard lock(mutex_);
  if (next_failure_) {
    error e = std::move(*next_failure_);
    next_failure_.reset();
    return e;
  }
  const pid_t pid = next_pid_++;
  spawns_.push_back({pid, env, gen, std::chrono::steady_clock::now()});
  workers_[pid] = std::make_unique<fake_worker>(request, pid, scripts_(env, gen), journal_);
  return pid;
}

void fake_launcher::signal_group(pid_t pid, int signal) noexcept {
  std::lock_guard lock(mutex_);
  signals_.push_back({pid, signal});
  auto it = workers_.find(pid);
  if (it != workers_.end() && (signal == SIGKILL || signal == SIGTERM)) it->second->kill(signal);
}

std::unique_ptr<fake_worker> fake_launcher::take(pid_t pid) {
  std::lock_guard lock(mutex_);
  auto it = workers_.find(pid);
  if (it == workers_.end()) return nullptr;
  auto w = std::move(it->second);
  workers_.erase(it);
  return w;
}

int fake_launcher::note_reaped(pid_t pid, int status) {
  std::lock_guard lock(mutex_);
  reaped_[pid] = status;
  return status;
}

int fake_launcher::reap(pid_t pid, std::chrono::milliseconds grace) noexcept {
  auto w = take(pid);
  if (!w) return 0;  // as reap_process: an unknown pid reads as already reaped
  if (auto status = w->wait(grace)) return note_reaped(pid, *status);
  w->kill(SIGKILL);
  // A killed fake ends as soon as its thread sees it; the bound only turns a hang into a loud
  // failure instead of a stuck test.
  const auto status = w->wait(std::chrono::seconds(10));
  return note_reaped(pid, status.value_or(killed_by(SIGKILL)));
}

std::optional<int> fake_launcher::try_reap(pid_t pid) noexcept {
  std::optional<int> status;
  {
    std::lock_guard lock(mutex_);
    auto it = workers_.find(pid);
    if (it == workers_.end()) return 0;  // as try_reap_process: not ours (any more)
    status = it->second->wait(std::chrono::milliseconds(0));
    if (!status) return std::nullopt;  // still running
    workers_.erase(it);
  }
  return note_reaped(pid, *status);
}

result<ipc::process_identity> fake_launcher::identity(pid_t pid) {
  std::lock_guard lock(mutex_);
  if (workers_.count(pid) == 0) {
    return error{ipc::proc_errc::no_such_process, "no fake worker has pid " +
                                                         std::to_string(pid)};
  }
  // A start time no real process of this pid could have: the pid is none of the kernel's.
  return ipc::process_identity{static_cast<std::uint64_t>(pid), 1};
}

void fake_launcher::fail_next_spawn(error e) {
  std::lock_guard lock(mutex_);
  next_failure_ = std::move(e);
}

std::vector<fake_launcher::spawn_record> fake_launcher::spawns() const {
  std::lock_guard lock(mutex_);
  return spawns_;
}

std::vector<fake_launcher::signal_record> fake_launcher::signals() const {
  std::lock_guard lock(mutex_);
  return signals_;
}

std::map<pid_t, int> fake_launcher::reaped() const {
  std::lock_guard lock(mutex_);
  return reaped_;
}

std::size_t fake_launcher::running() const {
  std::lock_guard lock(mutex_);
  return workers_.size();
}

}  // namespace orch::runtime_testing
