#include "orch/serve/upload_store.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "orch/ipc/unique_fd.hpp"
#include "orch/serve/confined_path.hpp"
#include "orch/serve/errc.hpp"
#include "orch/support/errno_error.hpp"

namespace orch::serve {

namespace {

// More numbered names than any directory holds on purpose; past it the upload fails rather
// than spending the API thread on a directory someone filled.
constexpr unsigned max_numbered = 10000;

std::string temporary_name() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = ".upload-0000000000000000.tmp";
  for (std::size_t i = 8; i < 24; ++i) s[i] = hex[gen() & 15];
  return s;
}

status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(serve_errc::file_io_failed, "writing the upload");
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

// Reads up to `size` bytes (fewer only at the end of the file); -1 on an error.
ssize_t read_full(int fd, char* buf, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

// Whether `dir/name` is a regular file (not a symlink) holding exactly `data`.
bool holds(int dir, const std::string& name, std::string_view data) {
  auto fd = open_confined_file(dir, name);
  if (!fd) return false;
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != data.size())
    return false;
  char buf[65536];
  std::size_t at = 0;
  while (at < data.size()) {
    const ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || static_cast<std::size_t>(n) > data.size() - at) return false;
    if (data.compare(at, static_cast<std::size_t>(n), std::string_view(buf, n)) != 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

// Whether the regular files `a` and `b` of `dir` (not through a symlink) hold the same bytes.
bool same_bytes_in(int dir, const std::string& a, const std::string& b) {
  auto fa = open_confined_file(dir, a);
  auto fb = open_confined_file(dir, b);
  if (!fa || !fb) return false;
  struct stat sa {}, sb {};
  if (::fstat(fa->get(), &sa) != 0 || ::fstat(fb->get(), &sb) != 0 || sa.st_size != sb.st_size)
    return false;
  char x[65536], y[65536];
  for (;;) {
    const auto n = read_full(fa->get(), x, sizeof x);
    if (n < 0 || read_full(fb->get(), y, static_cast<std::size_t>(n)) != n) return false;
    if (n == 0) return true;
    if (std::memcmp(x, y, static_cast<std::size_t>(n)) != 0) return false;
  }
}

// Moves `from` to the absent name `to`: 0, or the errno (EEXIST when `to` appeared meanwhile).
int rename_noreplace(int dir, const std::string& from, const std::string& to) {
  if (::renameat2(dir, from.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A file system without RENAME_NOREPLACE: a hard link also refuses a taken name.
  if (::linkat(dir, from.c_str(), dir, to.c_str(), 0) != 0) return errno;
  ::unlinkat(dir, from.c_str(), 0);
  return 0;
}

}  // namespace

result<std::pair<std::string, ipc::unique_fd>> create_temporary_file(int dir) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string temp = temporary_name();
    ipc::unique_fd fd(
        ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd) return std::pair(std::move(temp), std::move(fd));
    if (errno != EEXIST)
      return errno_error(serve_errc::file_io_failed, "creating a file for the upload");
  }
  return error{serve_errc::file_io_failed, "no free temporary name for the upload"};
}

result<std::string> place_temporary(int dir, const std::string& temp, const std::string& name) {
  struct remove_temp {
    int dir;
    const std::string& name;
    ~remove_temp() { ::unlinkat(dir, name.c_str(), 0); }  // ENOENT once renamed: harmless
  } cleanup{dir, temp};
  unsigned races = 0;
  for (unsigned n = 0; n <= max_numbered;) {
    const std::string candidate = n == 0 ? name : numbered_name(name, n);
    struct stat st {};
    if (::fstatat(dir, candidate.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISREG(st.st_mode) && same_bytes_in(dir, temp, candidate)) return candidate;
      ++n;
      continue;
    }
    if (errno != ENOENT)
      return errno_error(serve_errc::file_io_failed, "stat('" + candidate + "')");
    const int e = rename_noreplace(dir, temp, candidate);
    if (e == 0) return candidate;
    if (e != EEXIST) {
      errno = e;
      return errno_error(serve_errc::file_io_failed, "storing the file as '" + candidate + "'");
    }
    if (++races > 8) ++n;
  }
  return error{serve_errc::file_io_failed, "every name from '" + name + "' to '" +
                                                 numbered_name(name, max_numbered) + "' is taken"};
}

std::string numbered_name(const std::string& name, unsigned n) {
  auto dot = name.rfind('.');
  if (dot != std::string::npos && name.find_first_not_of('.') >= dot) dot = std::string::npos;
  const std::string stem = dot == std::string::npos ? name : name.substr(0, dot);
  const std::string ext = dot == std::string::npos ? std::string() : name.substr(dot);
  return stem + " (" + std::to_string(n) + ")" + ext;
}

result<std::optional<std::string>> stored_duplicate(int dir, const std::string& name,
                                                    std::string_view data) {
  for (unsigned n = 0; n <= max_numbered; ++n) {
    const std::string candidate = n == 0 ? name : numbered_name(name, n);
    struct stat st {};
    if (::fstatat(dir, candidate.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return std::optional<std::string>();
      return errno_error(serve_errc::file_io_failed, "stat('" + candidate + "')");
    }
    if (S_ISREG(st.st_mode) && holds(dir, candidate, data)) return std::optional(candidate);
  }
  return std::optional<std::string>();
}

result<std::string> store_upload(int dir, const std::string& name, std::string_view data,
                                 bool overwrite, same_bytes duplicates) {
  auto created = create_temporary_file(dir);
  if (!created) return created.err();
  std::string temp = std::move(created->first);
  ipc::unique_fd fd = std::move(created->second);
  // From here on the temporary file goes, whatever happens.
  struct remove_temp {
    int dir;
    const std::string& name;
    bool armed = true;
    ~remove_temp() {
      if (armed) ::unlinkat(dir, name.c_str(), 0);
    }
  } cleanup{dir, temp};
  if (auto w = write_all(fd.get(), data); !w) return w.err();
  if (::close(fd.release()) != 0)
    return errno_error(serve_errc::file_io_failed, "writing the upload");

  if (overwrite) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
      return error{serve_errc::bad_path, "'" + name + "' is a directory"};
    if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0)
      return errno_error(serve_errc::file_io_failed, "storing the upload as '" + name + "'");
    cleanup.armed = false;
    return name;
  }
  unsigned races = 0;  // names that were free at the stat and taken at the rename
  for (unsigned n = 0; n <= max_numbered;) {
    const std::string candidate = n == 0 ? name : numbered_name(name, n);
    struct stat st {};
    if (::fstatat(dir, candidate.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (duplicates == same_bytes::answer_that_name && S_ISREG(st.st_mode) &&
          holds(dir, candidate, data))
        return candidate;  // a duplicate
      ++n;
      continue;
    }
    if (errno != ENOENT)
      return errno_error(serve_errc::file_io_failed, "stat('" + candidate + "')");
    const int e = rename_noreplace(dir, temp, candidate);
    if (e == 0) {
      cleanup.armed = false;
      return candidate;
    }
    if (e != EEXIST) {
      errno = e;
      return errno_error(serve_errc::file_io_failed, "storing the upload as '" + candidate + "'");
    }
    // Taken meanwhile: look at the same name again (it may hold these bytes), a few times.
    if (++races > 8) ++n;
  }
  return error{serve_errc::file_io_failed, "every name from '" + name + "' to '" +
                                                 numbered_name(name, max_numbered) + "' is taken"};
}

}  // namespace orch::serve
