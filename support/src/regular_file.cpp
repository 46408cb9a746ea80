#include "orch/support/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace orch {
namespace {

struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

result<std::string> read_regular_file(const std::filesystem::path& file, std::size_t max_bytes) {
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
      return error{support::file_errc::not_found, name + ": file not found; check the path"};
    }
    return error{support::file_errc::unreadable,
                 name + ": cannot be opened (" + std::strerror(e) + "); check its permissions"};
  }
  fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return error{support::file_errc::not_regular,
                 name + ": not a regular file (a directory, device or pipe); name a file"};
  }
  const auto too_large = [&] {
    return error{support::file_errc::too_large, name + ": larger than the limit of " +
                                                    std::to_string(max_bytes) +
                                                    " bytes; is it the right file?"};
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return too_large();
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() > max_bytes) return too_large();  // it grew past the cap while we read
      out.resize(out.size() + 4096);
    }
    const ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return error{support::file_errc::unreadable,
                   name + ": read failed (" + std::strerror(errno) + "); check the file"};
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  if (have > max_bytes) return too_large();
  out.resize(have);
  return out;
}

}  // namespace orch
