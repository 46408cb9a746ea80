// peer_process: spawns ipc_test_peer with socket ends it inherits, and reaps it. Used by the
// integration and fault tests; the destructor SIGKILLs and reaps a peer still running, so a
// failed assertion never leaves a process behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "orch/ipc/unique_fd.hpp"

extern char** environ;

namespace orch::ipc::testing {

// A connected pair: `ours` is close-on-exec, `theirs` is inherited by the next spawn.
struct inherited_pair {
  unique_fd ours, theirs;
  inherited_pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours.reset(fds[0]);
    theirs.reset(fds[1]);
    ::fcntl(ours.get(), F_SETFD, FD_CLOEXEC);
  }
};

class peer_process {
 public:
  // Spawns ipc_test_peer with `args`; its stdout is captured.
  explicit peer_process(const std::vector<std::string>& args) {
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    stdout_.reset(out[0]);
    unique_fd write_end(out[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
    std::vector<std::string> all{IPC_TEST_PEER};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, IPC_TEST_PEER, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;
  ~peer_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }

  pid_t pid() const { return pid_; }
  void kill(int signal) const { ::kill(pid_, signal); }

  // Reaps the process; returns its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

  // Everything the peer printed, up to its exit.
  std::string read_stdout() {
    std::string text;
    char buffer[256];
    ssize_t n;
    while ((n = ::read(stdout_.get(), buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    }
    return text;
  }

 private:
  pid_t pid_ = -1;
  unique_fd stdout_;
};

// Runs `io` until `pred` holds or `limit` passes.
template <typename Pred>
bool run_until(boost::asio::io_context& io, Pred pred,
               std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < end) {
    io.restart();
    io.run_for(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace orch::ipc::testing
