// bench_gpu_transfer: the carried GPU check's transfer and memory-view steps (docs/gpu.md).
//
//   bench_gpu_transfer <orch-backend-cuda.so> [mib]     (default 256 MiB)
//
// 1. A shared segment (a memfd, as the pinned pool's) mapped in two processes, each registering
//    its own mapping with the device through the cuda backend plugin's host_register (the pool's
//    registrar, backend_pin_registrar): both registrations held at once, as host and worker hold
//    theirs.
// 2. Host-to-device bandwidth from that segment in each process, against memory from
//    cuMemHostAlloc and pageable memory, in interleaved rounds of the same run.
// 3. Each process's free-memory view (the plugin's mem_get_info) after it allocated on the card,
//    against the driver's device-wide figure read in the other process at the same moment.
//
// Exit 0: measured; 3: no device (no driver, or no card), with the reason on the first line;
// 1: anything else failed. The driver is loaded at run time, as the backend does.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "orch/ipc/memfd_segment.hpp"
#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/backend_pin_registrar.hpp"

namespace {

using namespace orch;

// The few driver entries the measurement needs, by their exported (versioned) names.
struct driver {
  using fn_init = int (*)(unsigned);
  using fn_count = int (*)(int*);
  using fn_device = int (*)(int*, int);
  using fn_retain = int (*)(void**, int);
  using fn_set_current = int (*)(void*);
  using fn_alloc = int (*)(unsigned long long*, std::size_t);
  using fn_free = int (*)(unsigned long long);
  using fn_copy = int (*)(unsigned long long, const void*, std::size_t);
  using fn_host_alloc = int (*)(void**, std::size_t, unsigned);
  using fn_free_host = int (*)(void*);
  using fn_info = int (*)(std::size_t*, std::size_t*);
  using fn_sync = int (*)();
  fn_init init = nullptr;
  fn_count count = nullptr;
  fn_device device = nullptr;
  fn_retain retain = nullptr;
  fn_set_current set_current = nullptr;
  fn_alloc alloc = nullptr;
  fn_free free = nullptr;
  fn_copy copy = nullptr;
  fn_host_alloc host_alloc = nullptr;
  fn_free_host free_host = nullptr;
  fn_info info = nullptr;
  fn_sync sync = nullptr;
};

// The driver with a current context on device 0, or the reason there is none.
std::string open_driver(driver& d) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return "no driver (libcuda.so.1 not found)";
  auto get = [&](const char* name, auto& out) {
    out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(::dlsym(lib, name));
    return out != nullptr;
  };
  if (!get("cuInit", d.init) || !get("cuDeviceGetCount", d.count) ||
      !get("cuDeviceGet", d.device) || !get("cuDevicePrimaryCtxRetain", d.retain) ||
      !get("cuCtxSetCurrent", d.set_current) || !get("cuMemAlloc_v2", d.alloc) ||
      !get("cuMemFree_v2", d.free) || !get("cuMemcpyHtoD_v2", d.copy) ||
      !get("cuMemHostAlloc", d.host_alloc) || !get("cuMemFreeHost", d.free_host) ||
      !get("cuMemGetInfo_v2", d.info) || !get("cuCtxSynchronize", d.sync)) {
    return "no driver (libcuda.so.1 lacks an entry this check needs)";
  }
  int n = 0, dev = 0;
  void* ctx = nullptr;
  if (d.init(0) != 0) return "no device (cuInit failed)";
  if (d.count(&n) != 0 || n == 0) return "no device (the driver sees no card)";
  if (d.device(&dev, 0) != 0 || d.retain(&ctx, dev) != 0 || d.set_current(ctx) != 0)
    return "no device (device 0's context could not be made current)";
  return {};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// GiB/s of copying `bytes` from `src` to the card, median of `reps` interleaved with the others.
struct source {
  const char* name;
  const void* data;
  std::vector<double> seconds;
};

bool measure(driver& d, std::vector<source>& sources, std::size_t bytes, int rounds) {
  unsigned long long target = 0;
  if (d.alloc(&target, bytes) != 0) return false;
  for (int r = 0; r < rounds + 1; ++r) {
    for (auto& s : sources) {
      const auto t0 = std::chrono::steady_clock::now();
      const bool ok = d.copy(target, s.data, bytes) == 0 && d.sync() == 0;
      const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      if (!ok) return false;
      if (r > 0) s.seconds.push_back(dt.count());  // the first round only warms up
    }
  }
  d.free(target);
  return true;
}

// One process's part: registers its mapping of the segment, runs `registered` (which returns
// once both processes hold theirs and it is this one's turn), measures, and prints.
template <typename Registered>
int run_side(const char* who, const char* plugin, int segment_fd, std::size_t bytes,
             Registered registered) {
  driver d;
  if (auto why = open_driver(d); !why.empty()) {
    std::printf("%s: %s\n", who, why.c_str());
    return 3;
  }
  auto device = plugins::backend_device::open(plugin, 0, -1);
  if (!device) {
    std::printf("%s: the cuda backend did not open device 0: %s\n", who,
                device.err().message.c_str());
    return 1;
  }
  auto mapped = ipc::mapping::map(segment_fd, 0, bytes, true);
  if (!mapped) return std::printf("%s: map failed\n", who), 1;
  std::memset(mapped->data(), 1, bytes);
  plugins::backend_pin_registrar registrar((*device)->api(), (*device)->device(), "cuda");
  if (auto st = registrar.register_range(mapped->data(), bytes); !st) {
    std::printf("%s: registering the segment failed: %s\n", who, st.err().message.c_str());
    return 1;
  }
  if (!registered()) return 1;

  void* pinned = nullptr;
  if (d.host_alloc(&pinned, bytes, 0) != 0) {
    std::printf("%s: cuMemHostAlloc failed\n", who);
    return 1;
  }
  std::memset(pinned, 1, bytes);
  std::vector<char> pageable(bytes, 1);
  std::vector<source> sources{{"registered segment", mapped->data(), {}},
                              {"cuMemHostAlloc", pinned, {}},
                              {"pageable", pageable.data(), {}}};
  if (!measure(d, sources, bytes, 8)) return std::printf("%s: a copy failed\n", who), 1;
  const double gib = static_cast<double>(bytes) / (1u << 30);
  const double floor = gib / median(sources[1].seconds);
  for (const auto& s : sources) {
    const double rate = gib / median(s.seconds);
    std::printf("%s: host-to-device from %-20s %7.2f GiB/s  %.2fx cuMemHostAlloc\n", who, s.name,
                rate, rate / floor);
  }
  // The free-memory view: this process holds `bytes` on the card now.
  unsigned long long held = 0;
  d.alloc(&held, bytes);
  std::uint64_t view_free = 0, view_total = 0;
  (*device)->api().mem_get_info((*device)->device(), &view_free, &view_total);
  std::size_t drv_free = 0, drv_total = 0;
  d.info(&drv_free, &drv_total);
  std::printf("%s: free-memory view (backend) %llu MiB of %llu MiB; driver %zu MiB of %zu MiB\n",
              who, static_cast<unsigned long long>(view_free >> 20),
              static_cast<unsigned long long>(view_total >> 20), drv_free >> 20, drv_total >> 20);
  d.free(held);
  d.free_host(pinned);
  registrar.unregister_range(mapped->data(), bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_gpu_transfer <orch-backend-cuda.so> [mib]\n");
    return 1;
  }
  const std::size_t bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256) << 20;
  auto segment = ipc::memfd_segment::create("orch-gpu-check", bytes);
  if (!segment) return std::fprintf(stderr, "memfd: %s\n", segment.err().message.c_str()), 1;
  // The driver must not be initialised before fork: each process opens it on its own.
  int held[2], go[2];
  if (::pipe(held) != 0 || ::pipe(go) != 0) return 1;
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(held[0]);
    ::close(go[1]);
    const int rc = run_side("worker process", argv[1], segment->fd(), bytes, [&] {
      char byte = 1;  // registered; then wait for the host's registration and the turn
      return ::write(held[1], &byte, 1) == 1 && ::read(go[0], &byte, 1) == 1;
    });
    std::fflush(stdout);
    ::_exit(rc);
  }
  ::close(held[1]);
  ::close(go[0]);
  int child_rc = -1;
  auto reap = [&] {
    int status = 0;
    ::close(go[1]);  // a worker still waiting for its turn reads the end and gives up
    ::waitpid(child, &status, 0);
    child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  };
  // Both registrations held at once; the worker process measures first, the host waiting.
  const int rc = run_side("host process", argv[1], segment->fd(), bytes, [&] {
    char byte = 0;
    if (::read(held[0], &byte, 1) != 1) return false;  // the worker failed before registering
    if (::write(go[1], &byte, 1) != 1) return false;
    reap();
    return child_rc == 0;
  });
  if (child_rc < 0) reap();
  return child_rc != 0 ? child_rc : rc;
}
