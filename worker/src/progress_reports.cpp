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
  // One frame, once per call: sent unless the channel's queue is at its own cap. Held to `room`
  // as the reports are, it was dropped whenever the flood's frames still filled it, and the
  // node's last report was lost.
  if (kept_ && channel.notify_if_room(ipc::message_type::progress, *kept_,
                                      std::numeric_limits<std::size_t>::max()))
    kept_.reset();
}

}  // namespace orch::worker
