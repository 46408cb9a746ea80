// A hostile native pack: one worker trying to exhaust the pinned budget for all. Its one
// node, HostileBudget, first reserves `pin_mib` MiB honestly (so it holds a grant), then tries
// every write a worker could make to the pinned budget besides its own slot:
//   - each control memfd it holds, through a writable mmap and write(2) of a read-write re-open
//     of /proc/self/fd/N, and a punched hole;
//   - its read-only mappings of that memfd (found in /proc/self/maps), made writable with
//     mprotect;
//   - every orch memfd in its host's fd table (/proc/<ppid>/fd/N): other workers' slots, the
//     host's own slot, the control memfd;
// and finally lies in its own slot: `reserved` = 2^64 - 1, the 0xFF of the original attack.
// It fails the node ("hostile_write_succeeded") when any write but the lie got through, and
// returns how many writes it tried.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "orch/worker/nodes.h"

namespace {

std::string link_of(const std::string& path) {
  char target[256] = {};
  const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

std::vector<std::string> fd_links(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

struct attack {
  explicit attack(orch_node_context* c) : ctx(c) {}
  orch_node_context* ctx;
  int tried = 0;
  std::string got_through;  // what a write reached that it must not have

  void note(const std::string& what) {
    got_through += (got_through.empty() ? "" : "; ") + what;
    ctx->api->log(ctx, ORCH_LOG_LEVEL_ERROR, ("write got through: " + what).c_str());
  }

  // Every way to write a whole file through `path`, re-opened read-write.
  void write_all(const std::string& path, const std::string& what) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ++tried;
    if (fd < 0) return;  // refused at open: as good as a refused write
    struct stat st {};
    const auto size = ::fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
    if (size > 0) {
      ++tried;
      void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        std::memset(map, 0xff, size);
        ::munmap(map, size);
        note("a writable mapping of " + what);
      }
      ++tried;
      const std::vector<char> junk(size, '\xff');
      if (::pwrite(fd, junk.data(), junk.size(), 0) > 0) note("write(2) to " + what);
      ++tried;
      if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      static_cast<off_t>(size)) == 0) {
        note("a hole punched in " + what);
      }
    }
    ::close(fd);
  }

  // Read-only mappings of the control memfd in this process, made writable.
  void mprotect_control_mappings() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find("memfd:orch-control") == std::string::npos) continue;
      unsigned long begin = 0, end = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) != 2) continue;
      ++tried;
      void* at = reinterpret_cast<void*>(begin);
      if (::mprotect(at, end - begin, PROT_READ | PROT_WRITE) == 0) {
        std::memset(at, 0xff, end - begin);
        note("mprotect of a control mapping");
      }
    }
  }

  // Sibling workers (the host's other children): any slot memfd they still hold open.
  void write_siblings_slots() {
    const std::string parent = std::to_string(::getppid());
    for (const auto& proc : fd_links("/proc")) {
      const std::string pid = proc.substr(proc.rfind('/') + 1);
      if (pid.find_first_not_of("0123456789") != std::string::npos ||
          pid == std::to_string(::getpid())) {
        continue;
      }
      std::ifstream stat(proc + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      char state = 0;
      long ppid = 0;
      if (close == std::string::npos ||
          std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) != 2 ||
          std::to_string(ppid) != parent) {
        continue;
      }
      ++siblings;
      for (const auto& path : fd_links(proc + "/fd")) {
        if (link_of(path).rfind("/memfd:orch-slot", 0) == 0) {
          write_all(path, "a sibling worker's slot");
        }
      }
    }
  }

  // The lie: our own slot is the one thing we may write, through the mapping we were given
  // (the worker keeps no fd of it).
  bool lie_in_own_slot() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find("memfd:orch-slot") == std::string::npos) continue;
      unsigned long begin = 0, end = 0;
      char perms[5] = {};
      if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) != 3) continue;
      if (perms[1] != 'w') continue;
      std::memset(reinterpret_cast<void*>(begin), 0xff, sizeof(std::uint64_t));  // reserved
      return true;
    }
    return false;
  }
  int siblings = 0;
};

orch_node_status hostile_node(orch_node_context* ctx, const orch_value* in, orch_value* out) {
  if (ctx->api->pinned_reserve(ctx, static_cast<std::uint64_t>(in[0].i) << 20) != 0) {
    ctx->api->fail(ctx, "out_of_memory", "the honest reservation was refused");
    return ORCH_NODE_ERROR;
  }
  attack a{ctx};
  for (const auto& path : fd_links("/proc/self/fd")) {
    if (link_of(path).rfind("/memfd:orch-control", 0) == 0) a.write_all(path, "the control memfd");
  }
  a.mprotect_control_mappings();
  const std::string host = "/proc/" + std::to_string(::getppid()) + "/fd";
  for (const auto& path : fd_links(host)) {
    const std::string target = link_of(path);
    if (target.rfind("/memfd:orch-slot", 0) == 0) a.write_all(path, "a slot in the host");
    if (target.rfind("/memfd:orch-control", 0) == 0) a.write_all(path, "the host's control fd");
  }
  a.write_siblings_slots();
  if (a.siblings == 0) {
    ctx->api->fail(ctx, "hostile_found_nothing", "no sibling worker to attack");
    return ORCH_NODE_ERROR;
  }
  if (!a.got_through.empty()) {
    ctx->api->fail(ctx, "hostile_write_succeeded", a.got_through.c_str());
    return ORCH_NODE_ERROR;
  }
  if (!a.lie_in_own_slot()) {
    ctx->api->fail(ctx, "hostile_lie_failed", "could not write its own slot");
    return ORCH_NODE_ERROR;
  }
  out[0].kind = ORCH_VALUE_INT;
  out[0].i = a.tried;
  return ORCH_NODE_OK;
}

orch_value int_value(std::int64_t v) {
  orch_value x{};
  x.kind = ORCH_VALUE_INT;
  x.i = v;
  return x;
}

const orch_node_input inputs[] = {
    {"pin_mib", "INT", ORCH_INPUT_REQUIRED | ORCH_INPUT_HAS_DEFAULT, 0, 0, 0, int_value(4)}};
const char* const int_output[] = {"INT"};
const orch_node_class classes[] = {
    {sizeof(orch_node_class), ORCH_NODE_OUTPUT_NODE | ORCH_NODE_NOT_IDEMPOTENT, "HostileBudget",
     "Hostile Budget", "test", inputs, 1, 1, int_output, &hostile_node, nullptr, nullptr, nullptr},
};
const orch_node_set set = {sizeof(orch_node_set), ORCH_NODES_ABI_MAJOR, classes,
                           sizeof(classes) / sizeof(classes[0]), 0};

}  // namespace

extern "C" __attribute__((visibility("default"))) const orch_node_set* orch_nodes_query(
    uint32_t abi_major) {
  return abi_major == ORCH_NODES_ABI_MAJOR ? &set : nullptr;
}
