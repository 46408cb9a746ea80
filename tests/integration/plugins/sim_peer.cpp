// The other process of test_sim_multiprocess: attaches a pager to the sim device whose fd it
// inherited, faults `pages` pages (kept resident, unpinned) and answers line commands on stdin:
//   "report" -> "free <bytes> resident <bytes>"   "exit" -> closes the pager and exits.
//   "evict"  -> reclaims every page of its own (no answer)
//   "check"  -> "intact <0|1> newly <pages>": re-faults every page and compares its signature
//               with the one from the first fault (a page lost and re-mapped gets a new one).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "orch/plugin/backend.h"
#include "orch/plugin/pager.h"
#include "orch/plugins/loader.hpp"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int fd = std::atoi(argv[1]);
  const uint64_t pages = std::strtoull(argv[2], nullptr, 10);
  constexpr uint64_t page = 32ull << 20;
  auto backend = orch::plugins::plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM, false);
  auto pager = orch::plugins::plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM, false);
  if (!backend || !pager || !(*backend)->init() || !(*pager)->init()) return 3;
  const orch_backend_api* be = (*backend)->table().backend_api;
  const orch_pager_api* api = (*pager)->table().pager_api;
  orch_device_config dc{sizeof(orch_device_config), 0, fd, 0};
  orch_device* view = nullptr;
  orch_pager_config c{};
  c.struct_size = sizeof c;
  c.level = ORCH_LEVEL_4;
  c.sim_fd = fd;
  c.page_size = page;
  c.poll_interval_ms = 0;
  c.poll_floor = -1;
  orch_pager* p = nullptr;
  orch_region* r = nullptr;
  if (be->device_open(&dc, &view) != ORCH_OK || api->device_open(&c, &p) != ORCH_OK ||
      api->region_create(p, pages * page, &r, nullptr) != ORCH_OK)
    return 4;
  std::vector<uint64_t> first(pages);
  for (uint64_t i = 0; i < pages; ++i) {
    size_t len = 0;
    if (api->region_fault(r, i * page, page, &first[i], 1, &len, nullptr) != ORCH_OK) return 5;
    api->region_unpin(r, i * page, page);
  }
  std::cout << "ready" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "report") {
      uint64_t free_bytes = 0;
      uint64_t resident = 0;
      be->mem_get_info(view, &free_bytes, nullptr);
      api->resident_bytes(p, &resident);
      std::cout << "free " << free_bytes << " resident " << resident << std::endl;
    } else if (line == "check") {
      bool intact = true;
      uint64_t newly = 0;
      for (uint64_t i = 0; i < pages; ++i) {
        uint64_t sig = 0;
        size_t len = 0;
        uint64_t mapped = 0;
        if (api->region_fault(r, i * page, page, &sig, 1, &len, &mapped) != ORCH_OK) intact = false;
        api->region_unpin(r, i * page, page);
        newly += mapped;
        if (sig != first[i]) intact = false;
      }
      std::cout << "intact " << (intact ? 1 : 0) << " newly " << newly << std::endl;
    } else if (line == "evict") {
      api->reclaim(p, UINT64_MAX, 0, nullptr);  // its own pages: what "check" must notice
      api->region_prioritize(r);                  // so they can be faulted back
    } else if (line == "exit") {
      break;
    }
  }
  api->device_close(p);
  be->device_close(view);
  return 0;
}
