#include "progress_reports.hpp"

namespace orch::worker {

void progress_reports::report(ipc::channel& channel, const std::string& node, std::uint64_t value,
                              std::uint64_t max) {
  nlohmann::json body{{"node", node}, {"value", value}, {"max", max}};
  std::lock_guard lock(mutex_);
  if (channel.notify_if_room(ipc::message_type::progress, body, room)) {
    kept_.reset();
  } else {
    kept_ = std::move(body);
  }
}

void progress_reports::flush(ipc::channel& channel) {
  std::lock_guard lock(mutex_);
  if (kept_ && channel.notify_if_room(ipc::message_type::progress, *kept_, room)) kept_.reset();
}

}  // namespace orch::worker
