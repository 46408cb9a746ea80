// The placement rule on a workload (fleet_workload.hpp): 300 prompts over five models of skewed
// popularity, in bursts, on three hosts that each hold two models resident. Placement must run
// at least 90% of them on a host that already holds their model, and round robin fewer; both
// shares, and the mean waits, are printed (docs/fleet.md, "Placement", quotes them).
#include <cstdio>

#include <gtest/gtest.h>

#include "fleet_workload.hpp"

namespace orch::fleet::testing {
namespace {

workload_result with_placement(const workload_options& o) {
  return simulate(o, [](std::span<const host_view> hosts, const prompt_needs& p,
                        std::span<const prompt_needs> waiting, std::uint64_t now) {
    return place(hosts, workload_fingerprint, p, waiting, now);
  });
}

workload_result with_round_robin(const workload_options& o) {
  round_robin rr;
  return simulate(o, [&rr](std::span<const host_view> hosts, const prompt_needs& p,
                           std::span<const prompt_needs>,
                           std::uint64_t) { return rr.pick(hosts, workload_fingerprint, p); });
}

void print(const char* name, const workload_result& r) {
  std::printf("%-12s %zu of %zu prompts warm (%.1f%%), mean wait %.2f ticks, done at tick %llu\n",
              name, r.warm, r.prompts, 100.0 * r.warm_share(), r.mean_wait(),
              static_cast<unsigned long long>(r.ticks));
}

TEST(placement_workload, placement_runs_nine_in_ten_prompts_warm_and_round_robin_fewer) {
  const workload_options o;
  const workload_result placed = with_placement(o);
  const workload_result rr = with_round_robin(o);
  print("placement", placed);
  print("round robin", rr);
  EXPECT_EQ(placed.prompts, o.prompts);
  EXPECT_EQ(rr.prompts, o.prompts);
  EXPECT_GE(placed.warm_share(), 0.90);
  EXPECT_LT(rr.warm_share(), placed.warm_share());
  // Not bought by holding prompts back: they wait no longer than round robin's.
  EXPECT_LE(placed.mean_wait(), rr.mean_wait());
}

TEST(placement_workload, the_same_seed_gives_the_same_result) {
  const workload_options o;
  const workload_result a = with_placement(o);
  const workload_result b = with_placement(o);
  EXPECT_EQ(a.warm, b.warm);
  EXPECT_EQ(a.ticks, b.ticks);
}

}  // namespace
}  // namespace orch::fleet::testing
