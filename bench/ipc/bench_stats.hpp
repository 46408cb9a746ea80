// Percentiles over per-operation samples, for the IPC benchmarks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace orch::ipc::bench {

using clock = std::chrono::steady_clock;

inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(index, samples.size() - 1)];
}

inline double micros(clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace orch::ipc::bench
