#include "orch/ipc/machine_ledger.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/support/errno_error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "saturating.hpp"

namespace orch::ipc {
namespace {

struct ledger_header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;
  std::uint32_t slot_count;
  std::uint32_t slot_size;
  std::uint64_t total_size;
  std::uint64_t padding[5];
};
static_assert(std::is_trivially_copyable_v<ledger_header> && sizeof(ledger_header) == 64);

struct ledger_slot {
  std::uint64_t pid;  // 0: free
  std::uint64_t start_time;
  std::uint64_t reserved;
  std::uint64_t budget;
  std::uint64_t padding[4];
};
static_assert(std::is_trivially_copyable_v<ledger_slot> && sizeof(ledger_slot) == 64);

struct ledger_page {
  ledger_header header;
  ledger_slot slots[machine_ledger_slots];
};
static_assert(sizeof(ledger_page) == 4096);

std::string mib(std::uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Where glibc's shm_open puts `name`.
std::string shm_path(const std::string& name) {
  return "/dev/shm" + name;
}

status check_name(const std::string& name) {
  if (name.size() < 2 || name.size() > 200 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return error{budget_errc::invalid_argument,
                 "machine ledger name '" + name + "' must be '/' and then a name without '/'"};
  }
  return ok_status();
}

error bad_ledger(const std::string& name, const std::string& why) {
  return error{budget_errc::bad_ledger,
               "the machine's pinned-budget ledger " + shm_path(name) + " " + why +
                   "; stop every comfy-orch host of this user and remove it"};
}

class flock_guard {
 public:
  flock_guard(int fd, int op) : fd_(fd) {
    while ((ok_ = ::flock(fd, op) == 0) == false && errno == EINTR) {
    }
  }
  ~flock_guard() {
    if (ok_) ::flock(fd_, LOCK_UN);
  }
  flock_guard(const flock_guard&) = delete;
  flock_guard& operator=(const flock_guard&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

status read_page(int fd, const std::string& name, ledger_page& page) {
  const ssize_t n = ::pread(fd, &page, sizeof(page), 0);
  if (n < 0) return errno_error(budget_errc::ledger_failed, "reading " + shm_path(name));
  const ledger_header& h = page.header;
  if (n != static_cast<ssize_t>(sizeof(page)) || h.magic != machine_ledger_magic ||
      h.version != machine_ledger_version || h.header_size != sizeof(ledger_header) ||
      h.slot_count != machine_ledger_slots || h.slot_size != sizeof(ledger_slot) ||
      h.total_size != sizeof(ledger_page)) {
    return bad_ledger(name, "is not a comfy-orch ledger of this version");
  }
  return ok_status();
}

status write_slot(int fd, const std::string& name, std::uint32_t index, const ledger_slot& s) {
  const auto offset = static_cast<off_t>(sizeof(ledger_header) + index * sizeof(ledger_slot));
  if (::pwrite(fd, &s, sizeof(s), offset) != static_cast<ssize_t>(sizeof(s))) {
    return errno_error(budget_errc::ledger_failed, "writing " + shm_path(name));
  }
  return ok_status();
}

// Frees the slots of hosts that are gone (not `self`).
status reclaim_dead(int fd, const std::string& name, ledger_page& page, std::uint32_t self) {
  for (std::uint32_t i = 0; i < machine_ledger_slots; ++i) {
    ledger_slot& s = page.slots[i];
    if (i == self || s.pid == 0 || is_alive({s.pid, s.start_time})) continue;
    spdlog::info("budget: machine ledger: reclaimed the slot of dead host pid {} ({})", s.pid,
                 mib(s.reserved));
    s = ledger_slot{};
    if (auto st = write_slot(fd, name, i, s); !st) return st;
  }
  return ok_status();
}

// Opens `name` and takes its lock, creating and initialising the file if needed; on success
// `fd` is open and locked by `lock` and `page` holds the ledger.
status open_locked(const std::string& name, unique_fd& fd, std::unique_ptr<flock_guard>& lock,
                   ledger_page& page) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    fd = unique_fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return errno_error(budget_errc::ledger_failed, "shm_open(" + name + ")");
    lock = std::make_unique<flock_guard>(fd.get(), LOCK_EX);
    if (!lock->ok()) return errno_error(budget_errc::ledger_failed, "flock of " + shm_path(name));
    struct stat held {
    }, named{};
    if (::fstat(fd.get(), &held) != 0)
      return errno_error(budget_errc::ledger_failed, "fstat of the ledger");
    // The last host may have unlinked the name between our open and our lock: open again.
    if (::stat(shm_path(name).c_str(), &named) != 0 || named.st_ino != held.st_ino ||
        named.st_dev != held.st_dev) {
      lock.reset();
      fd.reset();
      continue;
    }
    if (held.st_uid != ::geteuid() || (held.st_mode & 077) != 0 || !S_ISREG(held.st_mode)) {
      return bad_ledger(name, "belongs to another user or is open to others (it must be 0600)");
    }
    if (held.st_size == 0) {  // new, or its creator died before writing it
      ledger_page fresh{};
      fresh.header = {machine_ledger_magic,
                      machine_ledger_version,
                      sizeof(ledger_header),
                      machine_ledger_slots,
                      sizeof(ledger_slot),
                      sizeof(ledger_page),
                      {}};
      if (::pwrite(fd.get(), &fresh, sizeof(fresh), 0) != static_cast<ssize_t>(sizeof(fresh))) {
        return errno_error(budget_errc::ledger_failed, "initialising " + shm_path(name));
      }
    } else if (held.st_size != static_cast<off_t>(sizeof(ledger_page))) {
      return bad_ledger(name, "has a wrong size (" + std::to_string(held.st_size) + " bytes)");
    }
    return read_page(fd.get(), name, page);
  }
  return error{budget_errc::ledger_failed,
               "the machine ledger " + shm_path(name) +
                   " kept disappearing under this host; is /dev/shm mounted?"};
}

}  // namespace

std::string machine_ledger::default_name() {
  if (const char* v = std::getenv(machine_ledger_variable); v != nullptr && *v != '\0') return v;
  return "/comfy-orch-budget-" + std::to_string(::geteuid());
}

result<machine_ledger> machine_ledger::join(const std::string& name, std::uint64_t budget) {
  if (auto st = check_name(name); !st) return st.err();
  auto self = read_process_identity(::getpid());
  if (!self) return self.err();
  unique_fd fd;
  std::unique_ptr<flock_guard> lock;
  ledger_page page{};
  if (auto st = open_locked(name, fd, lock, page); !st) return st.err();
  if (auto st = reclaim_dead(fd.get(), name, page, machine_ledger_slots); !st) return st.err();
  for (std::uint32_t i = 0; i < machine_ledger_slots; ++i) {
    if (page.slots[i].pid != 0) continue;
    const ledger_slot mine{self->pid, self->start_time, 0, budget, {}};
    if (auto st = write_slot(fd.get(), name, i, mine); !st) return st.err();
    lock.reset();
    return machine_ledger(name, std::move(fd), i, budget);
  }
  return error{budget_errc::no_free_slot, "the machine ledger " + shm_path(name) + " has all " +
                                              std::to_string(machine_ledger_slots) +
                                              " host slots taken"};
}

machine_ledger::machine_ledger(machine_ledger&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::move(other.fd_)),
      slot_(other.slot_),
      budget_(other.budget_),
      reserved_(other.reserved_) {}

status machine_ledger::reserve(std::uint64_t bytes) {
  flock_guard lock(fd_.get(), LOCK_EX);
  if (!lock.ok()) return errno_error(budget_errc::ledger_failed, "flock of " + shm_path(name_));
  ledger_page page{};
  if (auto st = read_page(fd_.get(), name_, page); !st) return st;
  if (auto st = reclaim_dead(fd_.get(), name_, page, slot_); !st) return st;
  std::uint64_t others = 0;
  std::string list;
  for (std::uint32_t i = 0; i < machine_ledger_slots; ++i) {
    const ledger_slot& s = page.slots[i];
    if (i == slot_ || s.pid == 0) continue;
    others = detail::saturating_add(others, s.reserved);
    list += (list.empty() ? "" : ", ") + std::string("pid ") + std::to_string(s.pid) + " holds " +
            mib(s.reserved);
  }
  if (bytes > reserved_ && (bytes > budget_ || others > budget_ - bytes)) {
    const std::uint64_t left = detail::floored_sub(budget_, others);
    return error{budget_errc::machine_budget_exceeded,
                 mib(bytes) +
                     " of pinned memory for this host does not fit the machine's one "
                     "pinned budget of " +
                     mib(budget_) +
                     ": other comfy-orch hosts "
                     "on this machine hold " +
                     mib(others) + " (" + (list.empty() ? std::string("none") : list) +
                     "), which leaves " + mib(left) +
                     ". Lower [shm] pinned_pool_size to fit what is left, or stop "
                     "one of those hosts (ledger " +
                     shm_path(name_) + ")"};
  }
  auto self = read_process_identity(::getpid());
  const ledger_slot mine{self ? self->pid : static_cast<std::uint64_t>(::getpid()),
                         self ? self->start_time : 0,
                         bytes,
                         budget_,
                         {}};
  if (auto st = write_slot(fd_.get(), name_, slot_, mine); !st) return st;
  reserved_ = bytes;
  return ok_status();
}

result<std::vector<ledger_host>> machine_ledger::hosts() {
  flock_guard lock(fd_.get(), LOCK_EX);
  if (!lock.ok()) return errno_error(budget_errc::ledger_failed, "flock of " + shm_path(name_));
  ledger_page page{};
  if (auto st = read_page(fd_.get(), name_, page); !st) return st.err();
  if (auto st = reclaim_dead(fd_.get(), name_, page, slot_); !st) return st.err();
  std::vector<ledger_host> out;
  for (const auto& s : page.slots) {
    if (s.pid != 0) out.push_back({s.pid, s.start_time, s.reserved, s.budget});
  }
  return out;
}

result<std::vector<ledger_host>> machine_ledger::snapshot(const std::string& name) {
  if (auto st = check_name(name); !st) return st.err();
  unique_fd fd(::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0));
  if (!fd) {
    if (errno == ENOENT) return std::vector<ledger_host>{};
    return errno_error(budget_errc::ledger_failed, "shm_open(" + name + ")");
  }
  flock_guard lock(fd.get(), LOCK_SH);
  if (!lock.ok()) return errno_error(budget_errc::ledger_failed, "flock of " + shm_path(name));
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && st.st_size == 0) return std::vector<ledger_host>{};
  ledger_page page{};
  if (auto r = read_page(fd.get(), name, page); !r) return r.err();
  std::vector<ledger_host> out;
  for (const auto& s : page.slots) {
    if (s.pid != 0 && is_alive({s.pid, s.start_time})) {
      out.push_back({s.pid, s.start_time, s.reserved, s.budget});
    }
  }
  return out;
}

machine_ledger::~machine_ledger() {
  if (!fd_) return;
  flock_guard lock(fd_.get(), LOCK_EX);
  if (!lock.ok()) return;
  ledger_page page{};
  if (!read_page(fd_.get(), name_, page)) return;
  if (page.slots[slot_].pid == static_cast<std::uint64_t>(::getpid())) {
    page.slots[slot_] = ledger_slot{};
    (void)write_slot(fd_.get(), name_, slot_, page.slots[slot_]);
  }
  (void)reclaim_dead(fd_.get(), name_, page, machine_ledger_slots);
  bool empty = true;
  for (const auto& s : page.slots) empty = empty && s.pid == 0;
  // Under the lock: a host that opened the name meanwhile sees it gone once it locks, and
  // opens again (open_locked).
  if (empty) ::shm_unlink(name_.c_str());
}

}  // namespace orch::ipc
