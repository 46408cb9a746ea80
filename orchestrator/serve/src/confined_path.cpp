#include "orch/serve/confined_path.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "orch/serve/errc.hpp"
#include "orch/support/errno_error.hpp"

namespace orch::serve {

namespace {

// Names quoted in messages are the client's bytes; a NUL would cut the message short.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out + "'";
}

bool is_symlink(int dir, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

error symlink_error(const std::string& name) {
  return error{serve_errc::symlink_refused,
               shown(name) +
                   " is a symlink; serve follows none under its input, output and "
                   "temp directories (it could lead outside them)"};
}

}  // namespace

result<std::vector<std::string>> relative_components(std::string_view text) {
  if (text.find('\0') != std::string_view::npos)
    return error{serve_errc::bad_path, shown(text) + " holds a NUL byte"};
  if (!text.empty() && text.front() == '/')
    return error{serve_errc::bad_path, shown(text) + " is an absolute path"};
  // An upload creates what is missing: a subfolder of "b/" * 100000 made 100,000 directories.
  if (text.size() > max_relative_path_bytes)
    return error{serve_errc::bad_path, "a path longer than " +
                                             std::to_string(max_relative_path_bytes) +
                                             " bytes is refused"};
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto slash = text.find('/');
    const std::string_view part = text.substr(0, slash);
    text = slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1);
    if (part == "..")
      return error{serve_errc::bad_path, "a path with a '..' component is refused"};
    if (part.size() > 255)
      return error{serve_errc::bad_path, "a path component longer than 255 bytes is refused"};
    if (!part.empty() && part != ".") out.emplace_back(part);
    if (out.size() > max_relative_path_depth)
      return error{serve_errc::bad_path, "a path more than " +
                                               std::to_string(max_relative_path_depth) +
                                               " levels deep is refused"};
  }
  return out;
}

status plain_file_name(std::string_view name) {
  if (name.empty()) return error{serve_errc::bad_path, "the file name is empty"};
  if (name.find('\0') != std::string_view::npos)
    return error{serve_errc::bad_path, "the file name " + shown(name) + " holds a NUL byte"};
  if (name.find('/') != std::string_view::npos)
    return error{serve_errc::bad_path,
                 "the file name " + shown(name) + " holds a '/' (a subfolder goes in 'subfolder')"};
  if (name == "." || name == "..")
    return error{serve_errc::bad_path, "the file name " + shown(name) + " names no file"};
  return ok_status();
}

result<ipc::unique_fd> open_confined_directory(const std::filesystem::path& root,
                                               const std::vector<std::string>& components,
                                               bool create) {
  ipc::unique_fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return errno_error(serve_errc::directory_unusable, "open(" + root.string() + ")");
  return open_confined_directory(std::move(dir), components, create);
}

result<ipc::unique_fd> open_confined_directory(ipc::unique_fd dir,
                                               const std::vector<std::string>& components,
                                               bool create) {
  for (const auto& c : components) {
    constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(dir.get(), c.c_str(), flags);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), c.c_str(), 0755) != 0 && errno != EEXIST)
        return errno_error(serve_errc::file_io_failed, "mkdir(" + shown(c) + ")");
      fd = ::openat(dir.get(), c.c_str(), flags);  // what was made, or what raced it in
    }
    if (fd < 0) {
      const int e = errno;
      // O_NOFOLLOW answers ELOOP for a symlink; O_DIRECTORY may answer ENOTDIR first.
      if (e == ELOOP || (e == ENOTDIR && is_symlink(dir.get(), c))) return symlink_error(c);
      if (e == ENOENT || e == ENOTDIR)
        return error{serve_errc::not_found, "no directory " + shown(c) + " there"};
      errno = e;
      return errno_error(serve_errc::file_io_failed, "open(" + shown(c) + ")");
    }
    dir.reset(fd);
  }
  return dir;
}

result<ipc::unique_fd> open_confined_file(int dir, const std::string& name) {
  // O_NONBLOCK: a FIFO would otherwise block the API thread until a writer came.
  ipc::unique_fd fd(
      ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    const int e = errno;
    if (e == ELOOP) return symlink_error(name);
    if (e == ENOENT || e == ENOTDIR)
      return error{serve_errc::not_found, "no file " + shown(name)};
    errno = e;
    return errno_error(serve_errc::file_io_failed, "open(" + shown(name) + ")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return errno_error(serve_errc::file_io_failed, "fstat(" + shown(name) + ")");
  if (!S_ISREG(st.st_mode))
    return error{serve_errc::not_found, shown(name) + " is not a regular file"};
  // Reads of the file must block as any file's do (O_NONBLOCK does nothing to a regular file
  // today, but the descriptor is handed on to code that does not expect it).
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

namespace {

void walk_confined(int dir, const std::string& prefix, std::size_t depth, bool recurse,
                   const std::function<void(const std::string&, const struct stat&)>& fn) {
  // fdopendir takes the descriptor it is given: walk a duplicate, so `dir` stays the caller's.
  const int own = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return;
  DIR* stream = ::fdopendir(own);
  if (stream == nullptr) {
    ::close(own);
    return;
  }
  while (const dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name.empty() || name[0] == '.') continue;  // . and .., and hidden names
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      fn(prefix + name, st);
    } else if (S_ISDIR(st.st_mode) && recurse && depth < max_relative_path_depth) {
      ipc::unique_fd sub(
          ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) walk_confined(sub.get(), prefix + name + "/", depth + 1, recurse, fn);
    }
  }
  ::closedir(stream);
}

}  // namespace

void for_each_confined_file(int dir, bool recurse,
                            const std::function<void(const std::string&, const struct stat&)>& fn) {
  walk_confined(dir, "", 0, recurse, fn);
}

std::optional<std::string> read_at_most(int fd, std::size_t limit) {
  std::string bytes;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(n));
    if (bytes.size() > limit) return std::nullopt;
  }
}

}  // namespace orch::serve
