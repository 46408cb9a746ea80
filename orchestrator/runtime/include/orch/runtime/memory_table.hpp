// memory_table: the per-process memory view printed after a run: for the host, each worker and
// each pack that runs in no worker, the mode, the memory manager and its reason, the protocol
// level, device-resident bytes, pinned bytes reserved from the one budget, cast buffers (now and
// high-water), node-boundary releases, whether the worker applied the host's settings, and the
// budget itself; then the sum of every pinned reservation against that one budget. Read from the control
// segment (each process's published stats and budget slot), never by asking a worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/runtime/host_runtime.hpp"

namespace orch::runtime {

struct memory_row {
  std::string process;  // "host" or the env name
  std::string mode;     // "host", "worker" (isolated) or "in-process" (not isolated: see reason)
  long pid = 0;
  std::string state;
  std::string manager;  // "pager", "ledger", "-" (none)
  std::string reason;   // the manager's reason, or why the pack is not isolated
  std::uint32_t level = 0;
  std::uint64_t device_resident = 0;  // pager pages or ledger models on the device
  std::uint64_t device_total = 0;  // the device as the worker's pager sees it (0: no pager)
  std::uint64_t device_free = 0;   // its last polled free bytes
  std::uint64_t pinned_reserved = 0;
  std::uint64_t cast_now = 0;
  std::uint64_t cast_high_water = 0;
  std::uint64_t boundary_releases = 0;
  bool settings_match = true;
  std::uint64_t budget = 0;
};

// Call from the io thread (host_runtime::on_io_thread).
std::vector<memory_row> read_memory_table(host_runtime& host);

// The device as the workers' pagers see it (the host opens none itself): the largest total any
// row saw, and that row's last polled free bytes; before any poll, what the pagers do not hold.
// What GET /system_stats and GET /orch/fleet/host say of the device.
struct device_figures {
  std::uint64_t total = 0;
  std::uint64_t free = 0;
};
device_figures device_figures_of(const std::vector<memory_row>& rows);
std::string format_memory_table(const std::vector<memory_row>& rows);
nlohmann::json to_json(const std::vector<memory_row>& rows);

}  // namespace orch::runtime
