#include "orch/ipc/memfd_segment.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/support/errno_error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace orch::ipc {
namespace {

constexpr int size_seals = F_SEAL_SHRINK | F_SEAL_GROW;

}  // namespace

std::uint64_t page_size() noexcept {
  static const auto size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

mapping::mapping(mapping&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      length_(std::exchange(other.length_, 0)),
      writable_(other.writable_) {}

mapping& mapping::operator=(mapping&& other) noexcept {
  if (this != &other) {
    reset();
    addr_ = std::exchange(other.addr_, nullptr);
    length_ = std::exchange(other.length_, 0);
    writable_ = other.writable_;
  }
  return *this;
}

mapping::~mapping() {
  reset();
}

void mapping::reset() noexcept {
  if (addr_ != nullptr) ::munmap(addr_, static_cast<std::size_t>(length_));
  addr_ = nullptr;
  length_ = 0;
}

result<mapping> mapping::map(int fd, std::uint64_t offset, std::uint64_t length, bool writable) {
  if (length == 0 || offset % page_size() != 0) {
    return error{shm_errc::map_failed, "mapping needs a non-zero length and a page-aligned offset"};
  }
  const int prot = writable ? (PROT_READ | PROT_WRITE) : PROT_READ;
  void* addr = ::mmap(nullptr, static_cast<std::size_t>(length), prot, MAP_SHARED, fd,
                      static_cast<off_t>(offset));
  if (addr == MAP_FAILED)
    return errno_error(shm_errc::map_failed, "mmap of a shared segment failed");
  mapping m;
  m.addr_ = addr;
  m.length_ = length;
  m.writable_ = writable;
  return m;
}

result<memfd_segment> memfd_segment::create(const std::string& name, std::uint64_t size,
                                            bool final_seal) {
  if (size == 0) return error{shm_errc::memfd_failed, "a segment needs a non-zero size"};
  unique_fd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return errno_error(shm_errc::memfd_failed, "memfd_create(" + name + ")");
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return errno_error(shm_errc::memfd_failed, "ftruncate of segment " + name);
  }
  // F_SEAL_SEAL last: afterwards nobody, the host included, can lift the size seals.
  if (::fcntl(fd.get(), F_ADD_SEALS, size_seals | (final_seal ? F_SEAL_SEAL : 0)) != 0) {
    return errno_error(shm_errc::seal_failed, "sealing segment " + name);
  }
  return memfd_segment(std::move(fd), size);
}

status memfd_segment::seal_future_writes() {
#ifdef F_SEAL_FUTURE_WRITE
  if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0) return ok_status();
  const error refused = errno_error(shm_errc::seal_refused, "F_SEAL_FUTURE_WRITE");
#else
  const error refused{shm_errc::seal_refused, "F_SEAL_FUTURE_WRITE is not known to this build"};
#endif
  if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) {
    return errno_error(shm_errc::seal_failed, "F_SEAL_SEAL");
  }
  return refused;
}

bool memfd_segment::future_writes_sealed() const noexcept {
#ifdef F_SEAL_FUTURE_WRITE
  const int seals = ::fcntl(fd_.get(), F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_FUTURE_WRITE) != 0;
#else
  return false;
#endif
}

result<memfd_segment> memfd_segment::adopt(unique_fd fd, std::uint64_t expected_size) {
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & size_seals) != size_seals) {
    return error{shm_errc::not_sealed,
                 "received fd is not a size-sealed memfd; only host-created segments are accepted"};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return errno_error(shm_errc::stat_failed, "fstat of received segment");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (expected_size != 0 && size != expected_size) {
    return error{shm_errc::size_mismatch, "received segment has " + std::to_string(size) +
                                              " bytes, expected " + std::to_string(expected_size)};
  }
  return memfd_segment(std::move(fd), size);
}

}  // namespace orch::ipc
