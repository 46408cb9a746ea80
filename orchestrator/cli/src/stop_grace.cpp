#include "stop_grace.hpp"

#include <string>

namespace orch::cli {

void stop_grace::interrupted() {
  std::lock_guard lock(mutex_);
  if (watch_.joinable() || ended_) return;
  watch_ = std::thread([this] {
    std::unique_lock waiting(mutex_);
    if (ended_cv_.wait_for(waiting, grace_, [this] { return ended_; })) return;
    waiting.unlock();
    host_.kill_busy_workers(std::to_string(grace_.count()) + " ms after the interrupt");
  });
}

stop_grace::~stop_grace() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  ended_cv_.notify_all();
  if (watch_.joinable()) watch_.join();
}

}  // namespace orch::cli
