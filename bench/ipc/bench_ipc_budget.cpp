// Budget reserve/release pairs per second from the control segment, on the fast path (within
// each slot's grant, no message): one process alone (the floor), then two processes on the same
// budget at once. Reported as the ratio of the two-process total to the floor. A
// reservation is one CAS on the process's own slot plus two loads of its grant, so the two
// processes share no written cache line.
//
//   bench_ipc_budget [milliseconds]     (default 1000 per phase)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "bench_stats.hpp"
#include "orch/ipc/control_segment.hpp"

namespace {

using namespace orch::ipc;
using namespace orch::ipc::bench;

std::uint64_t hammer(const control_segment& control, std::uint32_t slot,
                     std::chrono::milliseconds span) {
  budget_account account(control, slot);
  std::uint64_t pairs = 0;
  const auto end = clock::now() + span;
  while (clock::now() < end) {
    for (int i = 0; i < 256; ++i) {
      if (account.reserve(4096).ok()) account.release(4096);
      ++pairs;
    }
  }
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::chrono::milliseconds span(argc > 1 ? std::atoi(argv[1]) : 1000);
  auto control = control_segment::create(std::uint64_t{1} << 30, 4);
  if (!control) return 1;
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto slot = control->claim_slot(process_identity{1000u + i, 1});
    if (!slot || !control->grow_grant(*slot, std::uint64_t{64} << 20)) return 1;
  }

  const std::uint64_t alone = hammer(*control, 0, span);

  // Two processes; each reports its count through a pipe. They map the control segment through
  // fork, which is the same shared mapping a received fd gives.
  int results[2];
  if (::pipe(results) != 0) return 1;
  int go[2];
  if (::pipe(go) != 0) return 1;
  for (std::uint32_t slot = 1; slot <= 2; ++slot) {
    if (::fork() == 0) {
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(1);
      const std::uint64_t n = hammer(*control, slot, span);
      if (::write(results[1], &n, sizeof(n)) != sizeof(n)) ::_exit(1);
      ::_exit(0);
    }
  }
  if (::write(go[1], "xx", 2) != 2) return 1;
  std::uint64_t contended = 0;
  for (int i = 0; i < 2; ++i) {
    std::uint64_t n = 0;
    if (::read(results[0], &n, sizeof(n)) == sizeof(n)) contended += n;
  }
  while (::wait(nullptr) > 0) {
  }
  const double seconds = std::chrono::duration<double>(span).count();
  std::printf("budget reserve+release pairs per second (4 KiB each)\n");
  std::printf("  one process (floor):       %.2f M/s\n",
              static_cast<double>(alone) / seconds / 1e6);
  std::printf("  two processes contending:  %.2f M/s total\n",
              static_cast<double>(contended) / seconds / 1e6);
  std::printf("  ratio contended/floor:     %.2f\n",
              static_cast<double>(contended) / static_cast<double>(alone));
  std::printf("  total reserved afterwards: %llu (must be 0)\n",
              static_cast<unsigned long long>(control->total_reserved()));
  return control->total_reserved() == 0 ? 0 : 1;
}
