// Figures measured in interleaved blocks beside the raw socket floors (docs/performance.md,
// "Floors"): each kind of round trip runs a block in turn, the order rotating by one per round,
// so that load and the scheduler's placement hit every kind alike. The floor is the lowest p50
// of the three ways of a raw socket round trip (socket_floors.hpp).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "socket_floors.hpp"

namespace orch::bench_floors {

using ipc::bench::percentile;

struct measured_kind {
  std::string name;
  std::function<double()> once;      // one round trip, microseconds
  std::function<void()> before = {};  // around each block (a floor pins its thread)
  std::function<void()> after = {};
  std::vector<double> samples = {};
  bool floor = false;
};

// The raw socket floors that this machine can measure, for frames of `bytes`. They own their
// echo processes until the last copy of the returned kinds goes.
inline std::vector<measured_kind> socket_floor_kinds(std::size_t bytes) {
  std::vector<measured_kind> kinds;
  for (auto k : {floor_kind::blocking, floor_kind::one_cpu, floor_kind::polling}) {
    auto f = std::make_shared<socket_floor>(k, bytes);
    if (!f->usable()) continue;
    kinds.push_back({floor_name(k), [f] { return f->round_trip_us(); },
                     [f] { f->pin(); }, [f] { f->unpin(); }, {}, true});
  }
  return kinds;
}

// `samples` of each kind, in blocks of `block`, after one round that only warms up.
inline void interleave(std::vector<measured_kind>& kinds, int samples, int block) {
  const std::size_t n = kinds.size();
  for (int round = 0, done = -block; done < samples; ++round, done += block) {
    for (std::size_t j = 0; j < n; ++j) {
      measured_kind& k = kinds[(j + static_cast<std::size_t>(round)) % n];
      if (k.before) k.before();
      for (int i = 0; i < block; ++i) {
        const double t = k.once();
        if (done >= 0) k.samples.push_back(t);
      }
      if (k.after) k.after();
    }
  }
}

// Prints the floors; returns the lowest p50, the floor.
inline double report_floors(const std::vector<measured_kind>& kinds) {
  double lowest = 0;
  for (const auto& k : kinds) {
    if (!k.floor) continue;
    const double p50 = percentile(k.samples, 0.5);
    std::printf("  %-40s p50 %8.1f us  p99 %8.1f us\n", k.name.c_str(), p50,
                percentile(k.samples, 0.99));
    if (lowest == 0 || p50 < lowest) lowest = p50;
  }
  return lowest;
}

// Prints one kind with its ratio to `floor50`; returns its p50.
inline double report(const measured_kind& k, double floor50) {
  const double p50 = percentile(k.samples, 0.5);
  std::printf("  %-40s p50 %8.1f us  p99 %8.1f us  %.2fx the floor\n", k.name.c_str(), p50,
              percentile(k.samples, 0.99), floor50 > 0 ? p50 / floor50 : 0.0);
  return p50;
}

}  // namespace orch::bench_floors
