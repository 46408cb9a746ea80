// stop_grace: what an interrupt gives a node that ignores it before its worker is killed
// (docs/security.md, "Stopping"). Some nodes never look at the interrupt flag (in ComfyUI too);
// `comfy-orch run` interrupted by Ctrl-C or SIGTERM had waited for the call's deadline (600 s).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "orch/runtime/host_runtime.hpp"

namespace orch::cli {

class stop_grace {
 public:
  stop_grace(runtime::host_runtime& host, std::chrono::milliseconds grace)
      : host_(host), grace_(grace) {}
  // The prompt ended: a grace still running ends with it.
  ~stop_grace();
  stop_grace(const stop_grace&) = delete;
  stop_grace& operator=(const stop_grace&) = delete;

  // An interrupt was sent: if the prompt is still running `grace` later, the workers inside a
  // call are killed (their calls fail, and the prompt ends). Once; any thread.
  void interrupted();

 private:
  runtime::host_runtime& host_;
  std::chrono::milliseconds grace_;
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  bool ended_ = false;
  std::thread watch_;
};

}  // namespace orch::cli
