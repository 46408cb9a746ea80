// call_histogram: node call durations of one env, in Prometheus' histogram shape (cumulative
// buckets, a sum and a count), for GET /metrics (docs/cli.md, "metrics"). Fixed buckets from
// 100 µs to 5 min, so it costs the same whatever the run's length.
#pragma once

#include <array>
#include <cstdint>

namespace orch::runtime {

struct call_histogram {
  static constexpr std::array<double, 14> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,  0.01,    0.025,  0.1,   0.5,
                                                    1.0,    5.0,     30.0,   300.0};
  std::array<std::uint64_t, bounds.size()> buckets{};  // observations <= bounds[i]
  std::uint64_t count = 0;
  double sum_seconds = 0;

  void observe(double seconds) noexcept {
    for (std::size_t i = 0; i < bounds.size(); ++i)
      if (seconds <= bounds[i]) ++buckets[i];
    ++count;
    sum_seconds += seconds;
  }
  void add(const call_histogram& other) noexcept {
    for (std::size_t i = 0; i < bounds.size(); ++i) buckets[i] += other.buckets[i];
    count += other.count;
    sum_seconds += other.sum_seconds;
  }
};

}  // namespace orch::runtime
