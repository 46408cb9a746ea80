// memory_table: the per-process memory view printed after a run (issue 5): for the host and each
// worker, the memory manager, the protocol level, pager-resident bytes, pinned bytes reserved
// from the one budget, the cast-buffer high-water, and the budget itself. Read from the control
// segment (each process's published stats and budget slot), never by asking a worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/orchestrator/host_runtime.hpp"

namespace orch::orchestrator {

struct memory_row {
  std::string process;  // "host" or the env name
  long pid = 0;
  std::string state;
  std::string manager;  // "pager", "ledger", "-" (none)
  std::uint32_t level = 0;
  std::uint64_t pager_resident = 0;
  std::uint64_t pinned_reserved = 0;
  std::uint64_t cast_high_water = 0;
  std::uint64_t budget = 0;
};

// Call from the io thread (host_runtime::sync).
std::vector<memory_row> read_memory_table(host_runtime& host);
std::string format_memory_table(const std::vector<memory_row>& rows);
nlohmann::json to_json(const std::vector<memory_row>& rows);

}  // namespace orch::orchestrator
