#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/errc.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace orch::ipc {
namespace {

// The control buffer has room for this many fds beyond what the caller expects, so a sender that
// sends too many is detected (and its fds closed here) instead of the kernel silently dropping
// the excess behind MSG_CTRUNC.
constexpr std::size_t excess_fd_room = 16;

}  // namespace

status send_fds(int socket, std::span<const std::byte> payload, std::span<const int> fds) {
  if (payload.empty()) return error{fd_errc::invalid_argument, "send_fds needs at least one byte"};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  std::size_t sent = 0;
  while (sent < payload.size()) {
    iovec iov{const_cast<std::byte*>(payload.data() + sent), payload.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {  // the fds ride on the first byte only
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error{fd_errc::send_failed,
                   std::string("sendmsg with SCM_RIGHTS: ") + std::strerror(errno)};
    }
    sent += static_cast<std::size_t>(n);
  }
  return ok_status();
}

result<received_fds> recv_fds(int socket, std::size_t payload_size, std::size_t max_fds) {
  received_fds out;
  out.payload.resize(payload_size);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (max_fds + excess_fd_room)));
  std::size_t got = 0;
  bool too_many = false;
  while (got < payload_size) {
    iovec iov{out.payload.data() + got, payload_size - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error{fd_errc::recv_failed, std::string("recvmsg: ") + std::strerror(errno)};
    }
    // Take ownership of every fd that arrived before judging the message, so none can leak.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.emplace_back(fd);
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) too_many = true;
    if (n == 0)
      return error{fd_errc::peer_closed, "socket closed before the fd message was complete"};
    got += static_cast<std::size_t>(n);
  }
  if (too_many || out.fds.size() > max_fds) {
    const std::size_t count = out.fds.size();
    out.fds.clear();  // closes them all
    return error{fd_errc::too_many_fds, "peer sent " + std::to_string(count) + " fds, at most " +
                                            std::to_string(max_fds) + " expected; all were closed"};
  }
  return out;
}

}  // namespace orch::ipc
