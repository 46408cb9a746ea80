// The sim device's shared segment (docs/sim-device.md): creating it, validating
// it at attach, the process slots and the reclaim of slots whose process died.
//
// Every function here works on the shared block alone, with atomics and CASes and no lock, so
// that a process killed at any instruction leaves a state the others can repair
// (docs/sim-device.md).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <new>
#include <string_view>

#include "orch/support/proc_stat.hpp"
#include "sim_segment.hpp"

namespace orch::plugin_detail::sim {
namespace {

constexpr uint64_t default_granularity = 2ull << 20;
constexpr uint32_t default_runtime = 1u << 16;  // 1.0
constexpr uint64_t va_base = 0x200000000000ull;

// False when the process does not exist (or its stat line cannot be read or parsed).
bool read_proc_stat(int32_t pid, proc_stat_fields* out) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n <= 0) return false;
  return parse_proc_stat_line(std::string_view(buf, static_cast<std::size_t>(n)), *out);
}

uint64_t self_start_time() noexcept {
  proc_stat_fields st;
  return read_proc_stat(self_pid(), &st) ? st.start_time : 0;
}

// A slot's owner is gone when its pid no longer exists, is a zombie (it holds no memory any
// more, so it need not be reaped first), or now names a process started at another time (pid
// reuse). A slot whose start time is not written yet is judged on the pid alone.
bool owner_is_dead(int32_t pid, uint64_t start_time) noexcept {
  proc_stat_fields st;
  if (!read_proc_stat(pid, &st)) return true;
  if (st.state == 'Z' || st.state == 'X') return true;
  return start_time != 0 && st.start_time != start_time;
}

// Claims a free process slot with a CAS on its pid: no lock in shared memory. sim_max_slots when
// every slot is taken.
uint32_t claim_slot(sim_segment* seg) noexcept {
  for (uint32_t i = 0; i < sim_max_slots; ++i) {
    int32_t expected = 0;
    if (seg->slots[i].pid.compare_exchange_strong(expected, self_pid())) return i;
  }
  return sim_max_slots;
}

}  // namespace

int32_t self_pid() noexcept { return static_cast<int32_t>(getpid()); }

orch_status create_segment(const orch_sim_config* config, int32_t* fd_out) {
  // ABI 1.0's struct ends with runtime_version (which took the place of a reserved field).
  if (config == nullptr || fd_out == nullptr || !ORCH_HAS_FIELD(config, runtime_version))
    return ORCH_INVALID;
  const uint64_t gran = config->granularity == 0 ? default_granularity : config->granularity;
  if ((gran & (gran - 1)) != 0 || config->capacity == 0 ||
      config->free_mode > ORCH_SIM_FREE_PROCESS)
    return ORCH_INVALID;
  // memfd, not shm_open: nothing can be left in /dev/shm (docs/shared-memory.md). The size is
  // sealed so no attached process can shrink the segment under the others.
  const int fd = memfd_create("orch-sim-device", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ORCH_DEVICE_ERROR;
  if (ftruncate(fd, sizeof(sim_segment)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return ORCH_DEVICE_ERROR;
  }
  void* p = mmap(nullptr, sizeof(sim_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return ORCH_DEVICE_ERROR;
  }
  // A fresh memfd is zero-filled, which is a valid state for every atomic below.
  auto* seg = new (p) sim_segment;
  seg->capacity = config->capacity;
  seg->granularity = gran;
  seg->free_mode = config->free_mode;
  seg->backing_store = config->backing_store != 0 ? 1u : 0u;
  seg->runtime_version = config->runtime_version != 0 ? config->runtime_version : default_runtime;
  seg->next_va.store(va_base);
  seg->version = sim_version;
  seg->size = sizeof(sim_segment);
  std::atomic_thread_fence(std::memory_order_release);
  seg->magic = sim_magic;
  munmap(p, sizeof(sim_segment));
  *fd_out = fd;
  return ORCH_OK;
}

orch_status attach(int32_t sim_fd, attachment* out) {
  struct stat st {};
  if (fstat(sim_fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(sim_segment)))
    return ORCH_INVALID;
  const int fd = fcntl(sim_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return ORCH_DEVICE_ERROR;
  void* p = mmap(nullptr, sizeof(sim_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return ORCH_DEVICE_ERROR;
  }
  auto* seg = static_cast<sim_segment*>(p);
  // The same rules as create: a zero or non-power-of-two granularity would divide by zero or
  // misround in every later call.
  const uint64_t capacity = seg->capacity;
  const uint64_t gran = seg->granularity;
  const uint32_t free_mode = seg->free_mode;
  const uint32_t runtime_version = seg->runtime_version;
  if (seg->magic != sim_magic || seg->version != sim_version || seg->size != sizeof(sim_segment) ||
      capacity == 0 || gran == 0 || (gran & (gran - 1)) != 0 || free_mode > ORCH_SIM_FREE_PROCESS ||
      runtime_version == 0) {
    munmap(p, sizeof(sim_segment));
    close(fd);
    return ORCH_INVALID;
  }
  // Dead processes' slots first, so crashed workers neither hold usage nor use up the slots.
  reclaim_dead_slots(seg, nullptr, nullptr);
  const uint32_t slot = claim_slot(seg);
  if (slot == sim_max_slots) {
    munmap(p, sizeof(sim_segment));
    close(fd);
    return ORCH_NO_SLOT;  // every process slot is held by a live process
  }
  seg->slots[slot].start_time.store(self_start_time(), std::memory_order_release);
  seg->slots[slot].attachments.store(1);
  out->seg = seg;
  out->fd = fd;
  out->slot = slot;
  out->capacity = capacity;
  out->granularity = gran;
  out->free_mode = free_mode;
  out->backing_store = seg->backing_store != 0;
  out->runtime_version = runtime_version;
  return ORCH_OK;
}

void detach(attachment& a) noexcept {
  // The pid goes last, with release: a process that claims the slot next sees it clean.
  auto& slot = a.seg->slots[a.slot];
  slot.registered.store(0);
  slot.budget.store(0);
  slot.attachments.store(0);
  slot.start_time.store(0);
  slot.pid.store(0, std::memory_order_release);
  munmap(a.seg, sizeof(sim_segment));
  close(a.fd);
  a.seg = nullptr;
  a.fd = -1;
}

// Gives back the slots of processes that died without closing (SIGKILL, crash): their usage is
// subtracted exactly and the slot becomes claimable. The CAS to sim_slot_reclaiming makes one
// reclaimer own each dead slot, so concurrent reclaimers never subtract twice.
void reclaim_dead_slots(sim_segment* seg, uint64_t* bytes, uint32_t* slots) noexcept {
  for (auto& s : seg->slots) {
    int32_t pid = s.pid.load(std::memory_order_acquire);
    if (pid <= 0 || pid == self_pid()) continue;
    if (!owner_is_dead(pid, s.start_time.load(std::memory_order_acquire))) continue;
    if (!s.pid.compare_exchange_strong(pid, sim_slot_reclaiming)) continue;
    const uint64_t used = s.used.exchange(0);
    seg->used.fetch_sub(used);
    s.registered.store(0);
    s.budget.store(0);
    s.attachments.store(0);
    s.start_time.store(0);
    s.pid.store(0, std::memory_order_release);
    if (bytes != nullptr) *bytes += used;
    if (slots != nullptr) ++*slots;
  }
}

bool take_fault(sim_segment* seg, uint32_t kind) noexcept {
  auto& counter = seg->faults[kind];
  int32_t n = counter.load(std::memory_order_acquire);
  while (n > 0) {
    // ORCH_SIM_FAULT_ALWAYS and above never count down: the fault holds until cleared.
    const int32_t next = n >= ORCH_SIM_FAULT_ALWAYS ? n : n - 1;
    if (counter.compare_exchange_weak(n, next, std::memory_order_acq_rel)) return true;
  }
  return false;
}

uint64_t process_used(const sim_segment* seg) noexcept {
  uint64_t total = 0;
  const int32_t pid = self_pid();
  for (const auto& s : seg->slots)
    if (s.pid.load(std::memory_order_acquire) == pid) total += s.used.load();
  return total;
}

uint64_t process_budget(const sim_segment* seg, uint64_t capacity) noexcept {
  uint64_t budget = 0;
  const int32_t pid = self_pid();
  for (const auto& s : seg->slots)
    if (s.pid.load(std::memory_order_acquire) == pid && s.budget.load() > budget)
      budget = s.budget.load();
  return budget == 0 ? capacity : budget;
}

}  // namespace orch::plugin_detail::sim
