// machine_budget_host: one host's shared memory, as `comfy-orch run` creates it
// (host_memory::create on a cpu device), for the three-hosts test. It joins the machine ledger
// named by ORCH_MACHINE_LEDGER_NAME, asks for a pool of <pool-bytes>, prints one line:
//   ok <pid>                       the pool fits and is reserved
//   refused <code> <message>       host_memory::create refused to start
// and then holds its reservation until its stdin closes.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "orch/runtime/host_memory.hpp"
#include "orch/support/logging.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: machine_budget_host <pool-bytes>\n");
    return 64;
  }
  orch::init_logging("machine_budget_host");
  orch::manifests::deployment d;
  d.host.device = {orch::manifests::device_kind::cpu, 0};
  d.shm.pinned_pool_size = std::strtoull(argv[1], nullptr, 10);
  auto memory = orch::runtime::host_memory::create(d, 4);
  if (memory) {
    std::printf("ok %d\n", static_cast<int>(::getpid()));
  } else {
    std::printf("refused %s %s\n", memory.err().code.c_str(), memory.err().message.c_str());
  }
  std::fflush(stdout);
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  return memory ? 0 : 1;
}
