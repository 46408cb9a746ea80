// placement: which `comfy-orch serve` host of a fleet runs a prompt, decided by the gateway that
// keeps the fleet's one queue (issue 58; docs/fleet.md, "Placement"). A pure function of plain
// data the gateway fills in from each host's /object_info, fingerprint, memory table and queue:
// nothing here reads a clock, a socket or a random number, so the same inputs give the same
// decision, and every decision carries a sentence that says why.
//
// The rule, in order:
//  1. Only hosts that are up and whose fingerprint (the hash of their deployment and envs) is the
//     fleet's are ever chosen; the gateway refuses the others elsewhere.
//  2. Only hosts that have every node class of the prompt. When no host of the fleet's
//     fingerprint has them all, up or not, the prompt is refused and the missing classes named.
//  3. A warm host (its memory table holds every model of the prompt, matched by what the loader
//     was asked to load) that is free takes it: the most free device memory first, then by name.
//  4. No warm host is free: SwarmUI's pressure rule (BackendHandler.LoadHighestPressureNow). Each
//     model wanted by waiting prompts that no free warm host can take gets a pressure, its
//     waiting prompts times `ticks_per_waiting_prompt` plus the ticks since the first of them was
//     queued (SwarmUI: 10 seconds a request plus the seconds waited). The prompt loads cold when
//     its most wanted model ranks among the n most pressed models, n the number of free capable
//     hosts, and either no capable host holds its models (there is no warm host to wait for), or
//     the model's waiting prompts outnumber its busy warm hosts (ours: each warm host takes one
//     within a run of freeing, so while they are enough a load buys nothing but an eviction) and
//     `pressure_window` ticks have passed since the model's first waiting prompt was queued
//     (SwarmUI: 1.5 s); otherwise it waits. It loads on the free host that already holds the
//     most of its models, then the one the fewest other waiting prompts are warm on (ours: a
//     load evicts), then the least recently used (SwarmUI's least recently released), then the
//     most free device memory, then by name.
//  5. No capable host free: it waits at the gateway.
//
// A busy host is never chosen: the gateway sends a host one prompt at a time (busy = running, or
// anything queued at it). A per-host queue would commit a prompt to a host before it is known
// which host frees first, and hide the prompts parked there from the pressure count; the cost,
// one round trip between a host finishing and its next prompt, is small beside a prompt's run.
//
// Time is logical: `now`, `queued_at` and `last_used` are ticks of a clock the gateway passes in
// (a counter of its scheduling rounds, or milliseconds it read itself), never read here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace orch::fleet {

// One host as the gateway last saw it.
struct host_view {
  std::string name;                    // unique within the fleet; ties are broken by it
  bool up = false;                     // answering its control socket and HTTP
  std::string fingerprint;             // hash of its deployment and envs
  std::set<std::string> node_classes;  // its /object_info's classes
  // Its memory table's models (resident stand-ins and worker models), each by what the loader
  // was asked to load, e.g. "checkpoints/sd15.safetensors".
  std::set<std::string> resident_models;
  std::uint64_t free_device_bytes = 0;
  bool running = false;         // a prompt is running on it
  std::size_t queued = 0;       // prompts queued at the host itself
  std::uint64_t last_used = 0;  // tick it was last given a prompt; 0: never
};

// What a prompt needs, from its API JSON: its nodes' classes and the models its loaders name.
struct prompt_needs {
  std::string prompt_id;
  std::set<std::string> node_classes;
  std::set<std::string> models;
  std::uint64_t queued_at = 0;  // tick it joined the gateway's queue
};

struct placement_policy {
  // Ticks a model's waiting prompts wait for its busy warm hosts before a free cold host loads
  // it. The default suits the clock of tests/unit/fleet/fleet_workload.hpp (a run 4 ticks, a load
  // 6): two runs. A gateway counting milliseconds sets about two runs of its prompts.
  std::uint64_t pressure_window = 8;
  // What one more waiting prompt adds to a model's pressure, in ticks of waiting.
  std::uint64_t ticks_per_waiting_prompt = 10;
};

enum class placement_kind {
  run,      // send it to `host`
  wait,     // stays queued at the gateway; ask again when a host frees or the clock moves
  refused,  // no host of the fleet has every node class; `missing_classes` names them
};

struct placement {
  placement_kind kind = placement_kind::wait;
  std::string host;                          // kind == run
  std::vector<std::string> loads;            // kind == run: its models the host must load
  std::vector<std::string> missing_classes;  // kind == refused, sorted
  std::string reason;  // one sentence: "host-2: has sd15 resident and is free"
};

// The decision for `prompt`. `waiting` is the gateway's queue (the prompt itself may be in it or
// not; prompt ids are counted once), for the pressure count; `now` is the logical clock.
placement place(std::span<const host_view> hosts, std::string_view fleet_fingerprint,
                const prompt_needs& prompt, std::span<const prompt_needs> waiting,
                std::uint64_t now, const placement_policy& policy = {});

// The baseline: the next free capable host after the last one it chose, in name order, whatever
// it holds resident. The same hosts are excluded and the same prompts refused as by place().
class round_robin {
 public:
  placement pick(std::span<const host_view> hosts, std::string_view fleet_fingerprint,
                 const prompt_needs& prompt);

 private:
  std::string last_;  // name of the host it chose last; empty before the first
};

std::string_view to_string(placement_kind kind);

}  // namespace orch::fleet
