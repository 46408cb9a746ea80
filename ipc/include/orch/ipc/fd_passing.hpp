// fd passing over a local stream socket with SCM_RIGHTS (docs/references.md, anchors §8.4.5
// and Ray's send_fd/recv_fd): this is how host-created memfd segments reach workers. Ray's checks
// are kept: a message carrying more fds than the receiver expects is refused (every fd it carried
// is closed, so nothing leaks into the receiver), and EINTR is retried.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

// Sends `payload` (1 byte or more) with `fds` attached to its first byte. The fds stay owned by
// the caller. Errors: "send_failed" (errno text), "invalid_argument" (empty payload).
status send_fds(int socket, std::span<const std::byte> payload, std::span<const int> fds);

struct received_fds {
  std::vector<std::byte> payload;
  std::vector<unique_fd> fds;  // owned by the receiver, close-on-exec
};

// Receives exactly `payload_size` bytes and the fds attached to them. Errors:
//   "too_many_fds"  more than max_fds arrived (all of them are closed);
//   "peer_closed"   end of stream before the payload was complete;
//   "recv_failed"   any other socket error (errno text).
result<received_fds> recv_fds(int socket, std::size_t payload_size, std::size_t max_fds);

}  // namespace orch::ipc
