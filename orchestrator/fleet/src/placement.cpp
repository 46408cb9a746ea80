// The placement rule and the round-robin baseline (orch/fleet/placement.hpp; docs/fleet.md,
// "Placement"). Every set and map here is ordered and every host list sorted by name, so that
// each tie, and each sentence, comes out the same on every run.
#include "orch/fleet/placement.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

namespace orch::fleet {
namespace {

bool has_all(const std::set<std::string>& have, const std::set<std::string>& need) {
  return std::includes(have.begin(), have.end(), need.begin(), need.end());
}

bool is_free(const host_view& h) {
  return !h.running && h.queued == 0;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string join(const std::set<std::string>& names) {
  return join(std::vector<std::string>(names.begin(), names.end()));
}

std::string count_of(std::size_t n, std::string_view one, std::string_view many = "") {
  if (n == 1) return "1 " + std::string(one);
  return std::to_string(n) + " " + (many.empty() ? std::string(one) + "s" : std::string(many));
}

// The hosts a prompt may be sent to, and, when there are none, whether it should wait or be
// refused.
struct candidates {
  std::vector<const host_view*> capable;  // up, the fleet's fingerprint, every class; by name
  bool capable_but_down = false;          // a host of the fingerprint has every class, not up
  std::vector<std::string> missing;       // no host of the fingerprint has every class: these
  std::string closest;                    // ... and, when each is on some host, the closest one
  std::size_t other_fingerprint = 0;      // up hosts left out for their fingerprint
};

// The classes to name in a refusal: those no host of the fingerprint has; where each class is on
// some host but none has them all, those the closest host lacks (fewest, then by name).
void name_missing(const std::vector<const host_view*>& fleet, const std::set<std::string>& need,
                  candidates& c) {
  for (const auto& cls : need) {
    if (std::none_of(fleet.begin(), fleet.end(),
                     [&](const host_view* h) { return h->node_classes.contains(cls); })) {
      c.missing.push_back(cls);
    }
  }
  if (!c.missing.empty()) return;
  for (const host_view* h : fleet) {
    std::vector<std::string> lacks;
    std::set_difference(need.begin(), need.end(), h->node_classes.begin(), h->node_classes.end(),
                        std::back_inserter(lacks));
    if (c.closest.empty() || lacks.size() < c.missing.size()) {
      c.missing = std::move(lacks);
      c.closest = h->name;
    }
  }
}

candidates find_candidates(std::span<const host_view> hosts, std::string_view fingerprint,
                           const std::set<std::string>& classes) {
  candidates c;
  std::vector<const host_view*> fleet;
  for (const auto& h : hosts) {
    if (h.fingerprint != fingerprint) {
      if (h.up) ++c.other_fingerprint;
      continue;
    }
    fleet.push_back(&h);
  }
  std::sort(fleet.begin(), fleet.end(),
            [](const host_view* a, const host_view* b) { return a->name < b->name; });
  for (const host_view* h : fleet) {
    if (!has_all(h->node_classes, classes)) continue;
    if (h->up) {
      c.capable.push_back(h);
    } else {
      c.capable_but_down = true;
    }
  }
  if (c.capable.empty() && !c.capable_but_down) name_missing(fleet, classes, c);
  return c;
}

std::string excluded_note(const candidates& c) {
  if (c.other_fingerprint == 0) return "";
  return " (" + count_of(c.other_fingerprint, "host") + " left out: fingerprint not the fleet's)";
}

// The decision when no host can take the prompt now: refused, or waiting for a host to come up
// or to free. Empty `reason` when one can.
placement no_host(const candidates& c, const prompt_needs& prompt) {
  placement p;
  if (!c.capable.empty()) return p;
  if (c.capable_but_down) {
    p.reason = "waiting: every host with the prompt's node classes is down" + excluded_note(c);
    return p;
  }
  p.kind = placement_kind::refused;
  p.missing_classes = c.missing;
  if (c.closest.empty()) {
    p.reason = "refused: no host has " + join(c.missing) + excluded_note(c);
  } else {
    p.reason = "refused: no host has all " +
               count_of(prompt.node_classes.size(), "node class", "node classes") +
               "; the closest, " + c.closest + ", lacks " + join(c.missing) + excluded_note(c);
  }
  return p;
}

std::vector<std::string> to_load(const host_view& h, const std::set<std::string>& models) {
  std::vector<std::string> out;
  std::set_difference(models.begin(), models.end(), h.resident_models.begin(),
                      h.resident_models.end(), std::back_inserter(out));
  return out;
}

struct pressure {
  std::size_t waiting = 0;
  std::uint64_t first_queued = 0;
};

// SwarmUI's pressure of each model wanted by a waiting prompt that no free warm host can take
// (those will run warm and need no load): its prompts' count and the first one's tick.
std::map<std::string, pressure> model_pressure(std::span<const host_view> hosts,
                                               std::string_view fingerprint,
                                               const prompt_needs& prompt,
                                               std::span<const prompt_needs> waiting) {
  std::map<std::string, pressure> out;
  std::set<std::string> counted;
  auto count = [&](const prompt_needs& w) {
    if (!counted.insert(w.prompt_id).second) return;
    const candidates c = find_candidates(hosts, fingerprint, w.node_classes);
    if (c.capable.empty()) return;
    for (const host_view* h : c.capable) {
      if (is_free(*h) && has_all(h->resident_models, w.models)) return;
    }
    for (const auto& m : w.models) {
      auto [it, fresh] = out.try_emplace(m, pressure{0, w.queued_at});
      ++it->second.waiting;
      it->second.first_queued = std::min(it->second.first_queued, w.queued_at);
    }
  };
  count(prompt);
  for (const auto& w : waiting) count(w);
  return out;
}

struct ranked {
  std::string model;
  std::size_t rank = 0;  // 0: the most pressed
  pressure p;
};

// The prompt's most pressed model and its rank among all the pressed models: by pressure (count
// times the weight plus the ticks since the first), then the earlier first prompt, then name.
ranked rank_of(const std::map<std::string, pressure>& pressures, const prompt_needs& prompt,
               std::uint64_t now, const placement_policy& policy) {
  auto score = [&](const pressure& p) {
    return p.waiting * policy.ticks_per_waiting_prompt +
           (now > p.first_queued ? now - p.first_queued : 0);
  };
  std::vector<std::pair<std::string, pressure>> order(pressures.begin(), pressures.end());
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (score(a.second) != score(b.second)) return score(a.second) > score(b.second);
    return a.second.first_queued < b.second.first_queued;
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (prompt.models.contains(order[i].first)) return {order[i].first, i, order[i].second};
  }
  return {};
}

placement run_on(const host_view& h, const prompt_needs& prompt, std::string reason) {
  placement p;
  p.kind = placement_kind::run;
  p.host = h.name;
  p.loads = to_load(h, prompt.models);
  p.reason = std::move(reason);
  return p;
}

// Rule 4's host, and the clause that says why it: the most of the prompt's models resident; then
// the fewest other waiting prompts warm on it (a load there would evict what they are about to
// use; SwarmUI has no such step, as it keeps one model a backend); then the least recently used;
// then the most free device memory; then by name (the list is by name and the sort stable).
std::pair<const host_view*, std::string> cold_host(std::vector<const host_view*> free,
                                                   const prompt_needs& prompt,
                                                   std::span<const prompt_needs> waiting) {
  auto held = [&](const host_view* h) {
    return prompt.models.size() - to_load(*h, prompt.models).size();
  };
  auto warm_for_others = [&](const host_view* h) {
    return std::count_if(waiting.begin(), waiting.end(), [&](const prompt_needs& w) {
      return w.prompt_id != prompt.prompt_id && !w.models.empty() &&
             has_all(h->resident_models, w.models);
    });
  };
  std::stable_sort(free.begin(), free.end(), [&](const host_view* a, const host_view* b) {
    if (held(a) != held(b)) return held(a) > held(b);
    if (warm_for_others(a) != warm_for_others(b)) return warm_for_others(a) < warm_for_others(b);
    if (a->last_used != b->last_used) return a->last_used < b->last_used;
    return a->free_device_bytes > b->free_device_bytes;
  });
  const host_view* h = free.front();
  if (free.size() == 1) return {h, "the one free host"};
  if (held(h) != held(free[1])) return {h, "free host holding the most of its models"};
  if (warm_for_others(h) != warm_for_others(free[1])) {
    return {h, "free host the fewest waiting prompts are warm on"};
  }
  return {h, "least recently used free host"};
}

}  // namespace

placement place(std::span<const host_view> hosts, std::string_view fleet_fingerprint,
                const prompt_needs& prompt, std::span<const prompt_needs> waiting,
                std::uint64_t now, const placement_policy& policy) {
  const candidates c = find_candidates(hosts, fleet_fingerprint, prompt.node_classes);
  if (placement p = no_host(c, prompt); !p.reason.empty()) return p;

  std::vector<const host_view*> warm, free_warm, free_cold;
  for (const host_view* h : c.capable) {
    const bool is_warm = has_all(h->resident_models, prompt.models);
    if (is_warm) warm.push_back(h);
    if (is_free(*h)) (is_warm ? free_warm : free_cold).push_back(h);
  }
  // Rule 3: a free warm host, the most free device memory first (stable: then by name).
  if (!free_warm.empty()) {
    std::stable_sort(free_warm.begin(), free_warm.end(),
                     [](const host_view* a, const host_view* b) {
                       return a->free_device_bytes > b->free_device_bytes;
                     });
    const host_view& h = *free_warm.front();
    std::string why =
        prompt.models.empty() ? "needs no model" : "has " + join(prompt.models) + " resident";
    why = h.name + ": " + why + " and is free";
    if (free_warm.size() > 1)
      why +=
          " (the most free device memory of " + count_of(free_warm.size(), "warm free host") + ")";
    return run_on(h, prompt, why);
  }
  const std::string warm_busy = count_of(warm.size(), "warm host") + " busy";
  // Rule 5: nothing free.
  if (free_cold.empty()) {
    placement p;
    p.reason = warm.empty() ? "waiting: all " + count_of(c.capable.size(), "capable host") + " busy"
                            : "waiting: " + warm_busy + ", no other host free";
    return p;
  }
  // Rule 4: SwarmUI's pressure rule.
  const ranked r =
      rank_of(model_pressure(hosts, fleet_fingerprint, prompt, waiting), prompt, now, policy);
  const std::uint64_t waited = now > r.p.first_queued ? now - r.p.first_queued : 0;
  placement p;
  if (r.rank >= free_cold.size()) {
    p.reason = "waiting: " + r.model + " ranks " + std::to_string(r.rank + 1) +
               " in pressure, with " + count_of(free_cold.size(), "free host") + " to load on";
    if (!warm.empty()) p.reason += "; " + warm_busy;
    return p;
  }
  // Each busy warm host takes one of the model's waiting prompts when it frees, within one run:
  // while they are enough, a load (and the eviction it makes) buys nothing.
  if (!warm.empty() && r.p.waiting <= warm.size()) {
    p.reason = "waiting: " + warm_busy + ", enough for " + r.model + "'s " +
               count_of(r.p.waiting, "waiting prompt");
    return p;
  }
  if (!warm.empty() && waited < policy.pressure_window) {
    p.reason = "waiting: " + warm_busy + ", the pressure window has not passed (" +
               std::to_string(waited) + " of " + std::to_string(policy.pressure_window) + " ticks)";
    return p;
  }
  const auto [chosen, clause] = cold_host(free_cold, prompt, waiting);
  const host_view& h = *chosen;
  const std::vector<std::string> loads = to_load(h, prompt.models);
  std::string why = h.name + ": " + clause + "; loads " + join(loads) + ", wanted by " +
                    count_of(r.p.waiting, "waiting prompt");
  why += warm.empty() ? "; no host holds it"
                      : "; " + warm_busy + " past the " + std::to_string(policy.pressure_window) +
                            "-tick window";
  return run_on(h, prompt, why);
}

placement round_robin::pick(std::span<const host_view> hosts, std::string_view fleet_fingerprint,
                            const prompt_needs& prompt) {
  const candidates c = find_candidates(hosts, fleet_fingerprint, prompt.node_classes);
  if (placement p = no_host(c, prompt); !p.reason.empty()) return p;
  const host_view* chosen = nullptr;
  for (const host_view* h : c.capable) {  // by name: the first free one after the last chosen
    if (!is_free(*h)) continue;
    if (h->name > last_) {
      chosen = h;
      break;
    }
    if (chosen == nullptr) chosen = h;  // wraps around to the first free one
  }
  if (chosen == nullptr) {
    placement p;
    p.reason = "waiting: all " + count_of(c.capable.size(), "capable host") + " busy";
    return p;
  }
  last_ = chosen->name;
  return run_on(*chosen, prompt, chosen->name + ": next free host in turn");
}

std::string_view to_string(placement_kind kind) {
  switch (kind) {
    case placement_kind::run:
      return "run";
    case placement_kind::wait:
      return "wait";
    case placement_kind::refused:
      return "refused";
  }
  return "unknown";
}

}  // namespace orch::fleet
