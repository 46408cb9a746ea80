#include "reader_grace.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace orch::plugin_detail {

using slot = reader_slot;

namespace reader_grace_detail {
constinit thread_local reader_slot* this_thread_slot __attribute__((tls_model("initial-exec"))) =
    nullptr;
std::atomic<bool> asymmetric{false};
}  // namespace reader_grace_detail

namespace {

using reader_grace_detail::asymmetric;
reader_slot*& t_slot() noexcept { return reader_grace_detail::this_thread_slot; }

// Threads beyond this many (at once) run the locked path; slots are reused when threads exit.
constexpr unsigned max_slots = 1024;
slot g_slots[max_slots];
std::atomic<unsigned> g_used{0};  // slots [0, g_used) have ever been handed out
std::once_flag g_membarrier_once;

// The slot goes back when its thread exits. A pthread key rather than a thread_local destructor:
// the latter would pin the plugin in memory until every thread that ever called it had exited.
// The key is deleted when the plugin is unloaded, so no destructor runs into unmapped code.
struct key_holder {
  pthread_key_t key{};
  bool ok = false;
  key_holder() noexcept {
    ok = pthread_key_create(&key, [](void* s) {
      // Runs on the exiting thread: forget the slot first, so a plugin call from a later
      // thread-local destructor of this thread takes a fresh slot instead of sharing this one
      // with whichever thread takes it next (which would break its grace periods).
      t_slot() = nullptr;
      static_cast<slot*>(s)->taken.store(false, std::memory_order_release);
    }) == 0;
  }
  ~key_holder() {
    if (ok) pthread_key_delete(key);
  }
};
key_holder g_key;

long membarrier(int cmd) noexcept { return syscall(__NR_membarrier, cmd, 0u, 0); }

}  // namespace

reader_slot* reader_grace_detail::take_slot() noexcept {
  if (!g_key.ok) return nullptr;
  for (unsigned i = 0; i < max_slots; ++i) {
    bool expected = false;
    if (g_slots[i].taken.compare_exchange_strong(expected, true)) {
      unsigned used = g_used.load();
      while (used < i + 1 && !g_used.compare_exchange_weak(used, i + 1)) {
      }
      if (pthread_setspecific(g_key.key, &g_slots[i]) != 0) {
        g_slots[i].taken.store(false);
        return nullptr;
      }
      t_slot() = &g_slots[i];
      return &g_slots[i];
    }
  }
  return nullptr;
}

void init_reader_grace() noexcept {
  std::call_once(g_membarrier_once, [] {
    asymmetric.store(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0);
  });
}

reader_slot* reader_slots(unsigned* count) noexcept {
  *count = g_used.load();
  return g_slots;
}

void fence_readers() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Every running thread of the process passes a full barrier.
  if (asymmetric.load(std::memory_order_relaxed) &&
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    // Cannot happen once registered; fall back to the slow command rather than guess.
    membarrier(MEMBARRIER_CMD_GLOBAL);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void wait_for_readers() noexcept {
  // A reader whose announcement the scan below misses has not yet looked anything up, and will
  // not find what was unpublished.
  fence_readers();
  const unsigned used = g_used.load();
  for (unsigned i = 0; i < used; ++i)
    while (g_slots[i].active.load(std::memory_order_acquire) != 0) sched_yield();
}

}  // namespace orch::plugin_detail
