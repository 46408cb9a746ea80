// The simulated GPU (DESIGN.md §4.8): a backend whose device state lives in a shared memfd
// segment, so several real processes attach to one device and compete for it.
//
// Shared: capacity, usage per process slot, "other process" usage, injected faults, the clock and
// counters (sim_segment.hpp). Process-local: physical handles, VA mappings and the optional
// backing store, which is poisoned when a physical allocation is released so tests can prove a
// changed page signature means lost contents.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "../common/host_link.hpp"
#include "backends.hpp"
#include "sim_segment.hpp"

struct orch_device {
  orch::plugin_detail::sim_segment* seg = nullptr;
  int fd = -1;
  uint32_t slot = 0;
  // The configuration, validated and copied at open. Any attached process can write the shared
  // block, so nothing a call depends on for its arithmetic is re-read from it.
  uint64_t capacity = 0;
  uint64_t granularity = 0;
  uint32_t free_mode = 0;
  bool backing_store = false;
  uint32_t runtime_version = 0;
  std::mutex mutex;  // process-local bookkeeping below
  struct phys {
    uint64_t size;
    unsigned char* backing;  // NULL without a backing store
    uint32_t mappings;       // a mapped handle cannot be released (as on CUDA)
  };
  struct mapping {
    uint64_t size;
    uint64_t handle;
  };
  std::map<uint64_t, phys> handles;
  std::map<uint64_t, mapping> maps;  // by va
  std::map<const void*, uint64_t> registered;  // host ranges by start (host_register)
  uint64_t next_handle = 1;
};

namespace orch::plugin_detail {
namespace {

constexpr uint64_t default_granularity = 2ull << 20;
constexpr uint32_t default_runtime = 1u << 16;  // 1.0
constexpr uint64_t va_base = 0x200000000000ull;

int32_t self_pid() noexcept { return static_cast<int32_t>(getpid()); }

// What /proc/<pid>/stat says about a process: its state (field 3) and start time (field 22).
struct proc_stat {
  char state = '?';
  uint64_t start_time = 0;
};

// False when the process does not exist (or its stat line cannot be read or parsed).
bool read_proc_stat(int32_t pid, proc_stat* out) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  const char* end = buf + n;
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const char* p = end;
  while (p > buf && p[-1] != ')') --p;
  if (p == buf) return false;
  for (int field = 3; field <= 22; ++field) {
    while (p < end && *p == ' ') ++p;
    const char* token = p;
    while (p < end && *p != ' ' && *p != '\n') ++p;
    if (token == p) return false;
    if (field == 3) out->state = *token;
    if (field == 22) return std::from_chars(token, p, out->start_time).ec == std::errc{};
  }
  return false;
}

uint64_t self_start_time() noexcept {
  proc_stat st;
  return read_proc_stat(self_pid(), &st) ? st.start_time : 0;
}

// A slot's owner is gone when its pid no longer exists, is a zombie (it holds no memory any
// more, so it need not be reaped first), or now names a process started at another time (pid
// reuse). A slot whose start time is not written yet is judged on the pid alone.
bool owner_is_dead(int32_t pid, uint64_t start_time) noexcept {
  proc_stat st;
  if (!read_proc_stat(pid, &st)) return true;
  if (st.state == 'Z' || st.state == 'X') return true;
  return start_time != 0 && st.start_time != start_time;
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

// Consumes one injected failure of `kind`; true when the call must fail.
bool take_fault(sim_segment* seg, uint32_t kind) noexcept {
  auto& counter = seg->faults[kind];
  int32_t n = counter.load(std::memory_order_acquire);
  while (n > 0) {
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

orch_status sim_create(const orch_sim_config* config, int32_t* fd_out) {
  if (config == nullptr || fd_out == nullptr || config->struct_size < sizeof(orch_sim_config))
    return ORCH_INVALID;
  const uint64_t gran = config->granularity == 0 ? default_granularity : config->granularity;
  if ((gran & (gran - 1)) != 0 || config->capacity == 0 ||
      config->free_mode > ORCH_SIM_FREE_PROCESS)
    return ORCH_INVALID;
  // memfd, not shm_open: nothing can be left behind in /dev/shm (DESIGN.md §4.2). The size is
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

orch_status sim_device_count(int32_t* count) {
  if (count == nullptr) return ORCH_INVALID;
  *count = 1;  // a segment is one device; which one is named by the fd at open
  return ORCH_OK;
}

orch_status sim_device_open(const orch_device_config* config, orch_device** out) {
  if (config == nullptr || out == nullptr || config->struct_size < sizeof(orch_device_config) ||
      config->sim_fd < 0)
    return ORCH_INVALID;
  struct stat st {};
  if (fstat(config->sim_fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(sim_segment)))
    return ORCH_INVALID;
  const int fd = fcntl(config->sim_fd, F_DUPFD_CLOEXEC, 0);
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
  // Claim a process slot with a CAS on its pid: no lock in shared memory.
  uint32_t slot = sim_max_slots;
  for (uint32_t i = 0; i < sim_max_slots && slot == sim_max_slots; ++i) {
    int32_t expected = 0;
    if (seg->slots[i].pid.compare_exchange_strong(expected, self_pid())) slot = i;
  }
  if (slot == sim_max_slots) {
    munmap(p, sizeof(sim_segment));
    close(fd);
    return ORCH_OOM_RETRYABLE;
  }
  seg->slots[slot].start_time.store(self_start_time(), std::memory_order_release);
  seg->slots[slot].attachments.store(1);
  auto* dev = new (std::nothrow) orch_device;
  if (dev == nullptr) {
    seg->slots[slot].start_time.store(0);
    seg->slots[slot].pid.store(0);
    munmap(p, sizeof(sim_segment));
    close(fd);
    return ORCH_OOM_RETRYABLE;
  }
  dev->seg = seg;
  dev->fd = fd;
  dev->slot = slot;
  dev->capacity = capacity;
  dev->granularity = gran;
  dev->free_mode = free_mode;
  dev->backing_store = seg->backing_store != 0;
  dev->runtime_version = runtime_version;
  *out = dev;
  return ORCH_OK;
}

void release_phys_locked(orch_device* dev, std::map<uint64_t, orch_device::phys>::iterator it) {
  if (it->second.backing != nullptr) {
    std::memset(it->second.backing, ORCH_SIM_POISON, it->second.size);
    std::free(it->second.backing);
  }
  dev->seg->used.fetch_sub(it->second.size);
  dev->seg->slots[dev->slot].used.fetch_sub(it->second.size);
  dev->seg->releases.fetch_add(1);
  dev->handles.erase(it);
}

void sim_device_close(orch_device* dev) {
  if (dev == nullptr) return;
  {
    std::lock_guard lock(dev->mutex);
    // A closing process gives back what it still holds: the device must not leak its usage.
    while (!dev->handles.empty()) release_phys_locked(dev, dev->handles.begin());
    dev->maps.clear();
    dev->registered.clear();  // a closed device's registrations end with it, as on CUDA
  }
  auto& slot = dev->seg->slots[dev->slot];
  slot.registered.store(0);
  slot.budget.store(0);
  slot.attachments.store(0);
  slot.start_time.store(0);
  slot.pid.store(0, std::memory_order_release);
  munmap(dev->seg, sizeof(sim_segment));
  close(dev->fd);
  delete dev;
}

orch_status sim_total_mem(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->capacity;
  return ORCH_OK;
}

orch_status sim_granularity(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->granularity;
  return ORCH_OK;
}

orch_status sim_mem_get_info(orch_device* dev, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (dev == nullptr || free_bytes == nullptr) return ORCH_INVALID;
  sim_segment* seg = dev->seg;
  if (take_fault(seg, ORCH_SIM_FAULT_POLL)) return ORCH_DEVICE_ERROR;
  seg->polls.fetch_add(1);
  uint64_t free = 0;
  uint64_t total = dev->capacity;
  if (dev->free_mode == ORCH_SIM_FREE_PROCESS) {
    // WDDM: the answer is about the caller's own budget; other processes are invisible.
    total = process_budget(seg, dev->capacity);
    const uint64_t mine = process_used(seg);
    free = mine < total ? total - mine : 0;
  } else {
    // Subtractions only: used + other can wrap when "other" is set near UINT64_MAX.
    const uint64_t used = seg->used.load();
    const uint64_t other = seg->other.load();
    free = used < total ? total - used : 0;
    free = other < free ? free - other : 0;
  }
  *free_bytes = free;
  if (total_bytes != nullptr) *total_bytes = total;
  return ORCH_OK;
}

orch_status sim_va_reserve(orch_device* dev, uint64_t size, uint64_t* va) {
  if (dev == nullptr || va == nullptr || size == 0) return ORCH_INVALID;
  if (take_fault(dev->seg, ORCH_SIM_FAULT_VA)) return ORCH_DEVICE_ERROR;
  const uint64_t g = dev->granularity;
  if (size > UINT64_MAX - 2 * g) return ORCH_INVALID;  // rounding and the guard would wrap
  const uint64_t rounded = (size + g - 1) / g * g;
  // Leave one granule of guard between reservations so off-by-one mappings cannot alias.
  *va = dev->seg->next_va.fetch_add(rounded + g);
  return ORCH_OK;
}

orch_status sim_va_free(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr || size == 0 || va == 0) return ORCH_INVALID;
  return ORCH_OK;  // addresses are never reused, so there is nothing to give back
}

orch_status sim_phys_create_unguarded(orch_device* dev, uint64_t size, uint64_t* handle) {
  if (dev == nullptr || handle == nullptr || size == 0 || size % dev->granularity != 0)
    return ORCH_INVALID;
  sim_segment* seg = dev->seg;
  if (take_fault(seg, ORCH_SIM_FAULT_CREATE_OOM)) return ORCH_OOM_RETRYABLE;
  if (take_fault(seg, ORCH_SIM_FAULT_DEVICE_ERROR)) return ORCH_DEVICE_ERROR;
  // Larger than the device: refuse before the backing store asks the host for that much.
  if (size > dev->capacity) return ORCH_OOM_RETRYABLE;
  unsigned char* backing = nullptr;
  if (dev->backing_store) {
    backing = static_cast<unsigned char*>(std::malloc(size));
    if (backing == nullptr) return ORCH_OOM_RETRYABLE;
    std::memset(backing, ORCH_SIM_POISON, size);  // fresh memory holds garbage
  }
  // Reserve capacity with a CAS: processes compete for one device without a shared lock.
  uint64_t used = seg->used.load();
  for (;;) {
    // Does used + other + size exceed capacity? Written with subtractions so that no sum can
    // wrap, whatever "other" or a corrupted total says.
    const uint64_t other = seg->other.load();
    if (used > dev->capacity || other > dev->capacity - used ||
        size > dev->capacity - used - other) {
      std::free(backing);
      return ORCH_OOM_RETRYABLE;
    }
    if (seg->used.compare_exchange_weak(used, used + size)) break;
  }
  // Charged to the slot at once: a process killed from here on leaves its slot's usage equal to
  // what it added to the device, which is what a reclaimer subtracts.
  seg->slots[dev->slot].used.fetch_add(size);
  std::lock_guard lock(dev->mutex);
  const uint64_t h = dev->next_handle++;
  try {
    dev->handles.emplace(h, orch_device::phys{size, backing, 0});
  } catch (...) {
    seg->slots[dev->slot].used.fetch_sub(size);
    seg->used.fetch_sub(size);
    std::free(backing);
    throw;
  }
  seg->creates.fetch_add(1);
  *handle = h;
  return ORCH_OK;
}

orch_status sim_phys_create(orch_device* dev, uint64_t size, uint64_t* handle) {
  return guarded([&] { return sim_phys_create_unguarded(dev, size, handle); });
}

orch_status sim_phys_release(orch_device* dev, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->handles.find(handle);
  if (it == dev->handles.end() || it->second.mappings != 0) return ORCH_INVALID;
  release_phys_locked(dev, it);
  return ORCH_OK;
}

orch_status sim_map_unguarded(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  if (dev == nullptr || size == 0) return ORCH_INVALID;
  if (take_fault(dev->seg, ORCH_SIM_FAULT_MAP)) return ORCH_DEVICE_ERROR;
  std::lock_guard lock(dev->mutex);
  auto it = dev->handles.find(handle);
  if (it == dev->handles.end() || it->second.size != size || dev->maps.count(va) != 0)
    return ORCH_INVALID;
  dev->maps.emplace(va, orch_device::mapping{size, handle});
  ++it->second.mappings;
  dev->seg->maps.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_map(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  return guarded([&] { return sim_map_unguarded(dev, va, size, handle); });
}

orch_status sim_unmap(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.find(va);
  if (it == dev->maps.end() || it->second.size != size) return ORCH_INVALID;
  if (auto ph = dev->handles.find(it->second.handle); ph != dev->handles.end())
    --ph->second.mappings;
  dev->maps.erase(it);
  dev->seg->unmaps.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_synchronize(orch_device* dev) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->syncs.fetch_add(1);
  return ORCH_OK;
}

// Registration costs nothing on sim but is counted, and misused as the driver refuses it: a
// range that overlaps one already registered, or unregistering a start that was never
// registered, answers ORCH_INVALID (cuMemHostRegister's ALREADY_REGISTERED / NOT_REGISTERED).
orch_status sim_host_register(orch_device* dev, void* ptr, uint64_t size) {
  if (dev == nullptr || ptr == nullptr || size == 0) return ORCH_INVALID;
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (size > UINTPTR_MAX - start) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto next = dev->registered.lower_bound(ptr);
  if (next != dev->registered.end() && reinterpret_cast<uintptr_t>(next->first) < start + size)
    return ORCH_INVALID;
  if (next != dev->registered.begin()) {
    const auto prev = std::prev(next);
    if (reinterpret_cast<uintptr_t>(prev->first) + prev->second > start) return ORCH_INVALID;
  }
  dev->registered.emplace(ptr, size);
  dev->seg->slots[dev->slot].registered.fetch_add(size);
  dev->seg->host_registrations.fetch_add(1);
  return ORCH_OK;
}

orch_status sim_host_unregister(orch_device* dev, void* ptr) {
  if (dev == nullptr || ptr == nullptr) return ORCH_INVALID;
  std::lock_guard lock(dev->mutex);
  auto it = dev->registered.find(ptr);
  if (it == dev->registered.end()) return ORCH_INVALID;
  dev->seg->slots[dev->slot].registered.fetch_sub(it->second);
  dev->seg->host_unregistrations.fetch_add(1);
  dev->registered.erase(it);
  return ORCH_OK;
}

uint64_t sim_now_ns(orch_device* dev) {
  if (dev != nullptr && dev->seg->clock_frozen.load(std::memory_order_acquire) != 0)
    return dev->seg->clock_ns.load();
  return monotonic_ns();
}

orch_status sim_runtime_version(orch_device* dev, uint32_t* major, uint32_t* minor) {
  if (major == nullptr || minor == nullptr) return ORCH_INVALID;
  *major = dev->runtime_version >> 16;
  *minor = dev->runtime_version & 0xFFFFu;
  return ORCH_OK;
}

void* sim_host_pointer(orch_device* dev, uint64_t va) {
  if (dev == nullptr) return nullptr;
  std::lock_guard lock(dev->mutex);
  auto it = dev->maps.upper_bound(va);
  if (it == dev->maps.begin()) return nullptr;
  --it;
  if (va >= it->first + it->second.size) return nullptr;
  auto ph = dev->handles.find(it->second.handle);
  if (ph == dev->handles.end() || ph->second.backing == nullptr) return nullptr;
  return ph->second.backing + (va - it->first);
}

orch_status sim_set_other_usage(orch_device* dev, uint64_t bytes) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->other.store(bytes);
  return ORCH_OK;
}

orch_status sim_inject_fault(orch_device* dev, uint32_t fault, int32_t count) {
  if (dev == nullptr || fault == 0 || fault >= sim_fault_kinds || count < 0) return ORCH_INVALID;
  dev->seg->faults[fault].store(count);
  return ORCH_OK;
}

orch_status sim_set_clock(orch_device* dev, uint64_t now_ns) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->clock_ns.store(now_ns);
  dev->seg->clock_frozen.store(1, std::memory_order_release);
  return ORCH_OK;
}

orch_status sim_advance_clock(orch_device* dev, uint64_t delta_ns) {
  if (dev == nullptr || dev->seg->clock_frozen.load() == 0) return ORCH_INVALID;
  dev->seg->clock_ns.fetch_add(delta_ns);
  return ORCH_OK;
}

orch_status sim_set_process_budget(orch_device* dev, uint64_t bytes) {
  if (dev == nullptr) return ORCH_INVALID;
  dev->seg->slots[dev->slot].budget.store(bytes);
  return ORCH_OK;
}

orch_status sim_counters(orch_device* dev, orch_sim_counters* out) {
  // Callers built before the appended fields pass a shorter struct_size: they get the prefix.
  constexpr uint32_t first_size = offsetof(orch_sim_counters, host_registrations);
  if (dev == nullptr || out == nullptr || out->struct_size < first_size) return ORCH_INVALID;
  const sim_segment* seg = dev->seg;
  out->creates = seg->creates.load();
  out->releases = seg->releases.load();
  out->syncs = seg->syncs.load();
  out->polls = seg->polls.load();
  out->maps = seg->maps.load();
  out->unmaps = seg->unmaps.load();
  out->used_bytes = seg->used.load();
  out->process_used_bytes = process_used(seg);
  out->other_bytes = seg->other.load();
  if (out->struct_size < sizeof(orch_sim_counters)) return ORCH_OK;
  out->host_registrations = seg->host_registrations.load();
  out->host_unregistrations = seg->host_unregistrations.load();
  out->registered_bytes = 0;
  out->process_registered_bytes = 0;
  const int32_t pid = self_pid();
  for (const auto& slot : seg->slots) {
    const int32_t owner = slot.pid.load(std::memory_order_acquire);
    if (owner <= 0) continue;
    out->registered_bytes += slot.registered.load();
    if (owner == pid) out->process_registered_bytes += slot.registered.load();
  }
  return ORCH_OK;
}

orch_status sim_reclaim_dead(orch_device* dev, uint64_t* bytes, uint32_t* slots) {
  if (dev == nullptr) return ORCH_INVALID;
  if (bytes != nullptr) *bytes = 0;
  if (slots != nullptr) *slots = 0;
  reclaim_dead_slots(dev->seg, bytes, slots);
  return ORCH_OK;
}

constexpr orch_backend_api sim_api{
    sizeof(orch_backend_api), 0,
    sim_device_count, sim_device_open, sim_device_close, sim_total_mem, sim_granularity,
    sim_mem_get_info, sim_va_reserve, sim_va_free, sim_phys_create, sim_phys_release, sim_map,
    sim_unmap, sim_synchronize, sim_host_register, sim_host_unregister, sim_now_ns,
    sim_host_pointer, sim_runtime_version};

constexpr orch_sim_api sim_control{
    sizeof(orch_sim_api), 0, sim_create, sim_set_other_usage, sim_inject_fault, sim_set_clock,
    sim_advance_clock, sim_set_process_budget, sim_counters, sim_reclaim_dead};

}  // namespace

const orch_backend_api* sim_backend_api() noexcept { return &sim_api; }
const orch_sim_api* sim_control_api() noexcept { return &sim_control; }

}  // namespace orch::plugin_detail
