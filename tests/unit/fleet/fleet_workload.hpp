// fleet_workload: a test's model of a fleet, to measure a placement rule on a workload (no
// product code: the gateway and hosts are not simulated, only what placement sees of them).
// Prompts over a few models of skewed popularity arrive in bursts drawn from a seeded generator;
// each host keeps `resident_capacity` models resident and evicts the least recently used one
// when it loads another; a prompt runs `run_ticks` ticks of a logical clock, and `load_ticks`
// more for each model its host loads first. Every tick, finished
// prompts free their hosts, arrivals join the gateway's queue, and the picker is asked about each
// queued prompt in arrival order. Nothing reads a real clock: the same options give the same
// result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "orch/fleet/placement.hpp"

namespace orch::fleet::testing {

struct workload_options {
  std::uint64_t seed = 58;
  std::vector<std::string> models = {"checkpoints/sd15.safetensors", "checkpoints/sdxl.safetensors",
                                     "unet/flux1-dev.safetensors", "checkpoints/sd3.5m.safetensors",
                                     "unet/wan2.1.safetensors"};
  std::vector<unsigned> popularity = {45, 25, 15, 10, 5};  // weights, one per model
  std::size_t hosts = 3;
  std::size_t resident_capacity = 2;  // models a host holds resident
  std::size_t prompts = 300;
  std::uint64_t run_ticks = 4;   // each prompt's run
  std::uint64_t load_ticks = 6;  // added to a run for each model the host must load first
  std::size_t burst_min = 4, burst_max = 12;  // prompts a burst
  std::uint64_t gap_min = 10, gap_max = 30;   // ticks between bursts
};

struct workload_result {
  std::size_t prompts = 0;
  std::size_t warm = 0;  // ran on a host with every model of theirs resident
  std::size_t refused = 0;
  std::uint64_t ticks = 0;   // until the last prompt finished
  std::uint64_t waited = 0;  // ticks prompts spent queued at the gateway, all together
  double mean_wait() const { return prompts == 0 ? 0.0 : double(waited) / double(prompts); }
  double warm_share() const { return prompts == 0 ? 0.0 : double(warm) / double(prompts); }
};

// A placement rule under test: the hosts as the gateway sees them, the prompt, the queue, now.
using picker = std::function<placement(std::span<const host_view>, const prompt_needs&,
                                       std::span<const prompt_needs>, std::uint64_t)>;

inline constexpr std::string_view workload_fingerprint = "fleet-fp";

// The prompts, in arrival order, each with its model and the tick it arrives.
std::vector<prompt_needs> make_workload(const workload_options& options);

workload_result simulate(const workload_options& options, const picker& pick);

}  // namespace orch::fleet::testing
