// supervisor_rig: a supervisor over real shared memory and real channels, whose workers are
// fake_workers started by a fake_launcher: the state machine runs as in a host, without a fork.
// The supervisor lives on an io thread of the rig's, as in host_runtime; tests reach it through
// on_io() and wait for conditions with generous limits, never for a fixed time.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "fake_launcher.hpp"
#include "leak_check.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/supervisor.hpp"

namespace orch::runtime_testing {

// Every wait of a test is bounded by this: far above anything a passing test waits for.
inline constexpr std::chrono::seconds generous_limit{10};

// A good worker of one node class, "Echo", that answers a call with its node id.
fake_worker_script good_worker();

// One state change the supervisor reported (on_state: ready or failed).
struct state_change {
  std::string env;
  runtime::worker_state state;
  std::uint32_t generation = 0;
};

class supervisor_test : public ipc::testing::leak_checked_test {
 protected:
  void TearDown() override;

  // Starts the supervisor with these [workers] lines (TOML) and scripts for its workers.
  void start_supervisor(const std::string& workers, fake_launcher::script_source scripts);
  // Starts env `env`'s worker.
  void start_env(const std::string& env,
                 std::chrono::milliseconds call_timeout = std::chrono::seconds(10));

  // Runs `fn` on the io thread and returns its result.
  template <typename F>
  auto on_io(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto future = task.get_future();
    boost::asio::post(*io_, [&task] { task(); });
    return future.get();
  }
  // Polls `pred` on the io thread until it holds; false after `generous_limit`.
  template <typename Pred>
  bool eventually(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + generous_limit;
    while (!on_io(pred)) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  bool eventually_in(const std::string& env, runtime::worker_state state, std::uint32_t generation);

  runtime::worker_info info(const std::string& env);
  // A node call for `node` of class Echo, whose answer arrives in the future.
  std::future<result<nlohmann::json>> call(const std::string& env, const std::string& node);
  std::vector<state_change> state_changes() const;

  std::shared_ptr<fake_launcher> launcher_;

 private:
  std::unique_ptr<runtime::host_memory> memory_;
  std::unique_ptr<boost::asio::io_context> io_;
  std::thread io_thread_;
  std::unique_ptr<runtime::supervisor> supervisor_;
  mutable std::mutex changes_mutex_;
  std::vector<state_change> changes_;

 protected:
  runtime::supervisor& sup() { return *supervisor_; }  // io thread only
};

}  // namespace orch::runtime_testing
