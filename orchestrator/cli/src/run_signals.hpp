// run_signals: what Ctrl-C, SIGTERM and SIGHUP do to `comfy-orch run` (docs/cli.md).
//
// The first one interrupts the prompt the way ComfyUI's POST /interrupt does: the running node
// sees interrupted(), the executor stops before the next node and emits execution_interrupted,
// the memory table is printed, the workers are stopped gracefully, and the exit code is 130.
// A second one forces the shutdown at once: the process exits 130 and the kernel kills every
// worker through PR_SET_PDEATHSIG; their memfds go with them, so nothing is left behind.
//
// The signals are blocked in the constructing thread, which must be the first one (threads
// inherit the mask), and taken by a dedicated thread with sigtimedwait: nothing runs in a signal
// handler, so the first signal may take locks and post to the io thread. Workers reset the mask
// before exec (child_process.cpp), so they still get SIGTERM from a graceful shutdown.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

namespace orch::cli {

class run_signals {
 public:
  run_signals();  // blocks SIGINT, SIGTERM and SIGHUP and starts the waiting thread
  run_signals(const run_signals&) = delete;
  run_signals& operator=(const run_signals&) = delete;
  ~run_signals();  // stops the thread and restores the mask

  // Called on the first signal, from the waiting thread; replaces any earlier one. Set it to an
  // empty function before what it refers to goes away: that waits for a call in progress.
  void on_interrupt(std::function<void()> fn);
  bool interrupted() const noexcept { return count_.load() > 0; }
  int signal_number() const noexcept { return signal_.load(); }

 private:
  void wait_loop();

  std::atomic<int> count_{0};
  std::atomic<int> signal_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // guards callback_ against on_interrupt from the main thread
  std::function<void()> callback_;
  std::thread thread_;
};

inline constexpr int exit_interrupted = 130;  // 128 + SIGINT, as a shell reports Ctrl-C

}  // namespace orch::cli
