#include "run_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace orch::cli {
namespace {

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

run_signals::run_signals() {
  const sigset_t set = handled_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { wait_loop(); });
}

run_signals::~run_signals() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  // A signal that came after the last look is dropped with the mask still blocked: the
  // command is ending anyway. Unblocking here would let it kill the process mid-exit.
}

void run_signals::on_interrupt(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  callback_ = std::move(fn);
}

void run_signals::wait_loop() {
  const sigset_t set = handled_signals();
  const timespec tick{0, 50'000'000};  // how soon the destructor is noticed
  while (!stop_.load()) {
    const int sig = ::sigtimedwait(&set, nullptr, &tick);
    if (sig <= 0) continue;  // EAGAIN (tick) or EINTR
    const char* name = ::sigabbrev_np(sig);
    if (count_.fetch_add(1) > 0) {
      // Written with write(2): the main thread may hold the logger's lock, forever if a
      // worker never answers, and this line must come out.
      const std::string line = std::string("comfy-orch: second SIG") + (name ? name : "?") +
                               ": forcing the shutdown (workers are killed)\n";
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      std::_Exit(exit_interrupted);
    }
    signal_.store(sig);
    spdlog::warn("SIG{}: interrupting the prompt; workers stop after it (send it again to "
                 "force)",
                 name ? name : "?");
    // Called under the lock, so on_interrupt({}) returns only once no call is running, and
    // the executor it reached can be destroyed after that.
    std::lock_guard lock(mutex_);
    if (callback_) callback_();
  }
}

}  // namespace orch::cli
