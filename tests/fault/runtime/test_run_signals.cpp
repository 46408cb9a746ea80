// `comfy-orch run` under Ctrl-C, SIGTERM and SIGHUP (docs/cli.md): the first signal interrupts the
// prompt as ComfyUI's /interrupt does (the running node sees interrupted(), execution_interrupted
// is printed, then the memory table, the workers stop gracefully, exit 130); a second one forces
// the shutdown (exit 130, no worker left). Real processes: the CLI, its workers, real signals.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using namespace std::chrono_literals;

// comfy-orch run --json, with stdout on a pipe read line by line.
class cli_process {
 public:
  cli_process(const fs::path& deployment, const fs::path& prompt, const fs::path& log) {
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(err, STDERR_FILENO);
      ::execl(ORCH_TEST_COMFY_ORCH, ORCH_TEST_COMFY_ORCH, "run", deployment.c_str(), "--prompt",
              prompt.c_str(), "--json", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
  }
  ~cli_process() {
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
    if (out_ >= 0) ::close(out_);
  }

  // Reads stdout until a line of `type` arrives (true) or `limit` passes (false).
  bool wait_for(const std::string& type, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      for (const auto& line : lines_) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.value("type", "") == type) return true;
      }
      if (read_some(50ms) == read_state::end) return false;
    }
    return false;
  }
  // Waits for the exit status, reading everything left; -1 when it did not exit within `limit`.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (status_ < 0 && std::chrono::steady_clock::now() < end) {
      read_some(20ms);
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    }
    if (status_ >= 0) {
      while (read_some(0ms) == read_state::data) {
      }
    }
    return status_;
  }
  pid_t pid() const { return pid_; }
  std::vector<nlohmann::json> messages() const {
    std::vector<nlohmann::json> out;
    for (const auto& line : lines_) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded()) out.push_back(std::move(j));
    }
    return out;
  }
  std::string text() const {
    std::string all;
    for (const auto& l : lines_) all += l + "\n";
    return all;
  }

 private:
  enum class read_state { data, nothing_yet, end };
  read_state read_some(std::chrono::milliseconds wait) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return read_state::nothing_yet;
    char buf[4096];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return read_state::end;
    pending_.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
      lines_.push_back(pending_.substr(0, nl));
      pending_.erase(0, nl + 1);
    }
    return read_state::data;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = -1;
  std::string pending_;
  std::vector<std::string> lines_;
};

class run_signals_test : public runtime_test {
 protected:
  fs::path sleep_prompt() {
    const fs::path p = dir_ / "sleep.json";
    write(p, R"({"1": {"class_type": "TestSleep", "inputs": {"ms": 60000}},
                 "2": {"class_type": "TestSleep", "inputs": {"ms": 60000}}})");
    return p;
  }
  std::vector<pid_t> worker_pids(const cli_process& cli) {
    std::vector<pid_t> pids;
    for (const auto& m : cli.messages()) {
      if (m.value("type", "") != "workers") continue;
      for (const auto& w : m["data"]) {
        if (w.value("pid", 0) > 0) pids.push_back(w["pid"].get<pid_t>());
      }
    }
    return pids;
  }
  static bool alive(pid_t pid) { return !process_gone(pid); }
};

TEST_F(run_signals_test, first_signal_interrupts_the_prompt_prints_the_table_and_exits_130) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(::sigabbrev_np(sig));
    cli_process cli(write_deployment(), sleep_prompt(), dir_ / "log.txt");
    ASSERT_TRUE(cli.wait_for("executing", 30s)) << cli.text();
    const auto workers = worker_pids(cli);
    ASSERT_FALSE(workers.empty());
    ASSERT_EQ(::kill(cli.pid(), sig), 0);
    const int status = cli.wait_exit(30s);
    ASSERT_GE(status, 0) << "did not exit: " << cli.text();
    ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of handling it";
    EXPECT_EQ(WEXITSTATUS(status), 130);
    bool interrupted = false, table = false;
    int executing = 0;
    for (const auto& m : cli.messages()) {
      const std::string type = m.value("type", "");
      if (type == "execution_interrupted") interrupted = true;
      if (type == "memory_table") table = true;
      // A node that started; the prompt's end is an `executing` for no node.
      if (type == "executing" && !m["data"]["node"].is_null()) ++executing;
    }
    EXPECT_TRUE(interrupted) << cli.text();
    EXPECT_TRUE(table) << cli.text();
    EXPECT_EQ(executing, 1) << "a node started after the interrupt: " << cli.text();
    for (const pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " left behind";
  }
}

TEST_F(run_signals_test, a_second_signal_forces_the_shutdown) {
  // A node that never looks at interrupted() keeps the first signal from ending the prompt.
  deployment_options o;
  cli_process cli(write_deployment(o), [&] {
    const fs::path p = dir_ / "busy.json";
    write(p, R"({"1": {"class_type": "TestBusy", "inputs": {"ms": 60000}}})");
    return p;
  }(), dir_ / "log.txt");
  ASSERT_TRUE(cli.wait_for("executing", 30s)) << cli.text();
  const auto workers = worker_pids(cli);
  ASSERT_EQ(::kill(cli.pid(), SIGTERM), 0);
  // The first one is handled (the prompt is interrupted, but the node never looks) ...
  EXPECT_EQ(cli.wait_exit(500ms), -1) << "exited on the first signal";
  ASSERT_EQ(::kill(cli.pid(), SIGTERM), 0);
  const int status = cli.wait_exit(30s);
  ASSERT_GE(status, 0) << "did not exit";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const auto end = std::chrono::steady_clock::now() + 10s;
  for (const pid_t w : workers) {
    while (alive(w) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(alive(w)) << "worker " << w << " outlived a forced shutdown";
  }
  std::ifstream log_in(dir_ / "log.txt");
  const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("second SIGTERM: forcing the shutdown"), std::string::npos) << log;
}

}  // namespace
}  // namespace orch::runtime_testing
