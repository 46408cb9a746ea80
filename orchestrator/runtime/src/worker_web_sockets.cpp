#include "orch/runtime/worker_web_sockets.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "orch/runtime/errc.hpp"

namespace orch::runtime {
namespace {

error failed(const std::string& what, int err) {
  return {runtime_errc::web_socket, "cannot make a worker's web socket: " + what + ": " + std::strerror(err)};
}

}  // namespace

worker_web_sockets::~worker_web_sockets() {
  if (directory_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(directory_, ec);
}

result<std::filesystem::path> worker_web_sockets::directory() {
  if (!directory_.empty()) return directory_;
  // Short: a socket's path is at most 107 bytes, and the project may live at a long one.
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::filesystem::path base = runtime != nullptr && *runtime == '/' ? runtime : "/tmp";
  std::string templ = (base / "comfy-orch-web-XXXXXX").string();
  if (templ.size() > 80) templ = "/tmp/comfy-orch-web-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return failed("mkdtemp " + templ, errno);  // 0700
  directory_ = templ;
  return directory_;
}

std::filesystem::path worker_web_sockets::path_of(const std::string& name) {
  auto dir = directory();
  return dir ? *dir / (name + ".sock") : std::filesystem::path();
}

result<ipc::unique_fd> worker_web_sockets::listen(const std::string& name) {
  auto dir = directory();
  if (!dir) return dir.err();
  const std::string path = (*dir / (name + ".sock")).string();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    return error{runtime_errc::web_socket, "a worker's web socket path is too long: " + path};
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ipc::unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return failed("socket", errno);
  ::unlink(path.c_str());  // an earlier generation's
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
    return failed("bind " + path, errno);
  if (::listen(fd.get(), SOMAXCONN) != 0) return failed("listen " + path, errno);
  return fd;
}

}  // namespace orch::runtime
