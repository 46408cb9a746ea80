// metrics_text: GET /metrics, the Prometheus text exposition format (version 0.0.4) of a running
// `serve` (docs/cli.md, "metrics"): per-process gauges of the status document's figures
// (process_status.hpp), counters of calls, restarts, node-boundary releases, evictions and frees,
// the number of unacknowledged divergences per process, and a histogram of node call durations
// per env. Every family has its HELP and TYPE; label values are escaped as the format asks.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/runtime/call_histogram.hpp"

namespace orch::live {

struct metrics_inputs {
  nlohmann::json status;                                 // read_process_status
  nlohmann::json divergences;                            // find_divergences over it
  std::map<std::string, runtime::call_histogram> call_durations;  // by env
  std::map<std::string, std::uint64_t> evictions;        // by env (memory_sampler's markers)
  std::map<std::string, std::uint64_t> frees;
};

std::string prometheus_metrics(const metrics_inputs& in);

// A label value as the exposition format writes it: \, " and newline escaped.
std::string escape_label_value(const std::string& value);

}  // namespace orch::live
