// The simulated fleet of fleet_workload.hpp.
#include "fleet_workload.hpp"

#include <algorithm>
#include <list>
#include <stdexcept>

namespace orch::fleet::testing {
namespace {

const std::set<std::string> workload_classes = {"CheckpointLoaderSimple", "CLIPTextEncode",
                                                "KSampler", "VAEDecode", "SaveImage"};

// splitmix64: one generator whose sequence is the same on every standard library (the
// distributions of <random> are not).
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) { return lo + next() % (hi - lo + 1); }
};

struct sim_host {
  host_view view;
  std::uint64_t busy_until = 0;
  std::list<std::string> recent;  // resident models, the most recently used first
};

constexpr std::uint64_t model_bytes = 4ull << 30;

// The host runs a prompt: each of its models is used (loaded where absent), the least recently
// used resident model evicted past the capacity.
void run(sim_host& h, const prompt_needs& p, std::uint64_t now, const workload_options& o) {
  std::uint64_t ticks = o.run_ticks;
  for (const auto& m : p.models) {
    if (!h.view.resident_models.contains(m)) ticks += o.load_ticks;
    h.recent.remove(m);
    h.recent.push_front(m);
  }
  while (h.recent.size() > o.resident_capacity) h.recent.pop_back();
  h.view.resident_models = {h.recent.begin(), h.recent.end()};
  h.view.free_device_bytes = (o.resident_capacity - h.recent.size()) * model_bytes;
  h.view.running = true;
  h.view.last_used = now;
  h.busy_until = now + ticks;
}

}  // namespace

std::vector<prompt_needs> make_workload(const workload_options& o) {
  splitmix64 rng{o.seed};
  unsigned total = 0;
  for (unsigned w : o.popularity) total += w;
  std::vector<prompt_needs> out;
  std::uint64_t tick = 1;
  while (out.size() < o.prompts) {
    const std::size_t burst = rng.between(o.burst_min, o.burst_max);
    for (std::size_t i = 0; i < burst && out.size() < o.prompts; ++i) {
      std::uint64_t draw = rng.next() % total;
      std::size_t m = 0;
      while (draw >= o.popularity[m]) draw -= o.popularity[m++];
      out.push_back({"p" + std::to_string(out.size()), workload_classes, {o.models[m]}, tick});
    }
    tick += rng.between(o.gap_min, o.gap_max);
  }
  return out;
}

workload_result simulate(const workload_options& o, const picker& pick) {
  const std::vector<prompt_needs> arrivals = make_workload(o);
  std::vector<sim_host> hosts(o.hosts);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    hosts[i].view.name = "host-" + std::to_string(i);
    hosts[i].view.up = true;
    hosts[i].view.fingerprint = std::string(workload_fingerprint);
    hosts[i].view.node_classes = workload_classes;
    hosts[i].view.free_device_bytes = o.resident_capacity * model_bytes;
  }
  workload_result r;
  std::vector<prompt_needs> queue;
  std::size_t next = 0;
  for (std::uint64_t now = 1; r.prompts + r.refused < arrivals.size(); ++now) {
    if (now > 1'000'000) throw std::runtime_error("the workload did not drain");
    for (auto& h : hosts) {
      if (h.view.running && h.busy_until <= now) h.view.running = false;
    }
    while (next < arrivals.size() && arrivals[next].queued_at == now)
      queue.push_back(arrivals[next++]);
    std::vector<prompt_needs> still;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      std::vector<host_view> views;
      for (const auto& h : hosts) views.push_back(h.view);
      // The queue as the gateway holds it: those placed this tick are gone.
      std::vector<prompt_needs> waiting(still);
      waiting.insert(waiting.end(), queue.begin() + i, queue.end());
      const placement d = pick(views, queue[i], waiting, now);
      if (d.kind == placement_kind::wait) {
        still.push_back(queue[i]);
        continue;
      }
      if (d.kind == placement_kind::refused) {
        ++r.refused;
        continue;
      }
      auto h = std::find_if(hosts.begin(), hosts.end(),
                            [&](const sim_host& s) { return s.view.name == d.host; });
      if (h == hosts.end() || h->view.running) throw std::runtime_error("picked a busy host");
      ++r.prompts;
      // Judged from the host's own table, not from what the picker said it would load.
      const auto& held = h->view.resident_models;
      if (std::includes(held.begin(), held.end(), queue[i].models.begin(), queue[i].models.end())) {
        ++r.warm;
      }
      run(*h, queue[i], now, o);
      r.waited += now - queue[i].queued_at;
      r.ticks = std::max(r.ticks, h->busy_until);
    }
    queue = std::move(still);
  }
  return r;
}

}  // namespace orch::fleet::testing
