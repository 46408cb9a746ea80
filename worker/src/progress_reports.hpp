// progress_reports: a node's progress, sent to the host without ever filling the channel
// (docs/protocol.md, "progress"). Progress is lossy by nature, as ComfyUI's bar shows the latest
// value: a node that reports faster than the host reads keeps only its latest report, which goes
// with the next report that finds room, or at the end of the node's call. Before this, 5,000
// calls in a loop filled the channel's queue and the worker was closed as a peer not reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/channel.hpp"

namespace orch::worker {

class progress_reports {
 public:
  // At most this many frames may wait in the channel when a report is sent.
  static constexpr std::size_t room = 64;

  void report(ipc::channel& channel, const std::string& node, std::uint64_t value,
              std::uint64_t max);
  // Sends the latest report kept back, if any, at the end of the node's call: whatever waits,
  // unless the channel's queue is full.
  void flush(ipc::channel& channel);

 private:
  std::mutex mutex_;
  std::optional<nlohmann::json> kept_;
};

}  // namespace orch::worker
