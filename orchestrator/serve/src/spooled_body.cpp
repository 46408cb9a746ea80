#include "spooled_body.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <utility>

#include "orch/serve/errc.hpp"
#include "orch/support/errno_error.hpp"

namespace orch::serve {

result<ipc::unique_fd> open_spool_file(const std::filesystem::path& dir) {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto path = dir / (".request-body-" + std::to_string(gen()) + ".tmp");
    ipc::unique_fd fd(
        ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno == EEXIST) continue;
    if (!fd)
      return errno_error(serve_errc::file_io_failed, "creating a file for a request body in " +
                                                           dir.string());
    ::unlink(path.c_str());  // gone from the directory; the descriptor keeps it until closed
    return fd;
  }
  return error{serve_errc::file_io_failed, "no free name for a request body in " + dir.string()};
}

result<mapped_body> mapped_body::map(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(serve_errc::file_io_failed, "reading a body");
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return mapped_body(nullptr, 0);  // mmap refuses a length of 0
  void* at = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (at == MAP_FAILED) return errno_error(serve_errc::file_io_failed, "mapping a body");
  return mapped_body(static_cast<const char*>(at), size);
}

mapped_body::mapped_body(mapped_body&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

mapped_body::~mapped_body() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace orch::serve
