// The placement rule (orch/fleet/placement.hpp), one rule or tie a test: the fingerprint and node
// classes first, a refusal that names what is missing, a free warm host, SwarmUI's pressure rule
// on a logical clock, a busy host never chosen, and the same decision for the same inputs. Every
// decision's kind, host and reason is asserted exactly.
#include "orch/fleet/placement.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace orch::fleet {
namespace {

constexpr std::string_view fleet_fp = "fp-a";
const std::set<std::string> classes = {"CheckpointLoaderSimple", "KSampler", "SaveImage"};

host_view host(std::string name, std::set<std::string> resident = {}, bool busy = false) {
  host_view h;
  h.name = std::move(name);
  h.up = true;
  h.fingerprint = std::string(fleet_fp);
  h.node_classes = classes;
  h.resident_models = std::move(resident);
  h.free_device_bytes = 8ull << 30;
  h.running = busy;
  return h;
}

prompt_needs needs(std::string id, std::set<std::string> models, std::uint64_t queued_at = 0) {
  return {std::move(id), classes, std::move(models), queued_at};
}

placement decide(const std::vector<host_view>& hosts, const prompt_needs& p,
                 const std::vector<prompt_needs>& waiting = {}, std::uint64_t now = 0) {
  return place(hosts, fleet_fp, p, waiting, now);
}

TEST(placement, free_warm_host_takes_the_prompt) {
  const auto d = decide({host("host-1"), host("host-2", {"sd15"})}, needs("p", {"sd15"}));
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.host, "host-2");
  EXPECT_TRUE(d.loads.empty());
  EXPECT_EQ(d.reason, "host-2: has sd15 resident and is free");
}

TEST(placement, warm_hosts_tie_on_free_device_memory_then_name) {
  std::vector<host_view> hosts = {host("host-3", {"sd15"}), host("host-2", {"sd15"}),
                                  host("host-1", {"sd15"})};
  hosts[0].free_device_bytes = 16ull << 30;  // host-3: the most free memory wins
  auto d = decide(hosts, needs("p", {"sd15"}));
  EXPECT_EQ(d.host, "host-3");
  EXPECT_EQ(d.reason,
            "host-3: has sd15 resident and is free (the most free device memory of 3 warm free "
            "hosts)");
  hosts[0].free_device_bytes = 8ull << 30;  // all equal: the first by name
  d = decide(hosts, needs("p", {"sd15"}));
  EXPECT_EQ(d.host, "host-1");
}

TEST(placement, a_prompt_without_models_takes_any_free_host) {
  const auto d = decide({host("host-1", {}, true), host("host-2")}, needs("p", {}));
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.reason, "host-2: needs no model and is free");
}

TEST(placement, a_host_of_another_fingerprint_is_never_chosen) {
  std::vector<host_view> hosts = {host("host-1", {"sd15"}), host("host-2")};
  hosts[0].fingerprint = "fp-b";
  const auto d = decide(hosts, needs("p", {"sd15"}));
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.host, "host-2");
  EXPECT_EQ(d.loads, std::vector<std::string>{"sd15"});

  hosts[1].fingerprint = "fp-b";  // none left: refused, naming why the hosts were left out
  const auto none = decide(hosts, needs("p", {"sd15"}));
  EXPECT_EQ(none.kind, placement_kind::refused);
  EXPECT_EQ(none.reason,
            "refused: no host has CheckpointLoaderSimple, KSampler, SaveImage (2 hosts left out: "
            "fingerprint not the fleet's)");
}

TEST(placement, a_host_down_is_never_chosen) {
  std::vector<host_view> hosts = {host("host-1", {"sd15"}), host("host-2")};
  hosts[0].up = false;
  EXPECT_EQ(decide(hosts, needs("p", {"sd15"})).host, "host-2");
}

TEST(placement, refusal_names_the_classes_no_host_has) {
  std::vector<host_view> hosts = {host("host-1"), host("host-2")};
  prompt_needs p = needs("p", {"sd15"});
  p.node_classes.insert({"Hunyuan3DLoader", "MeshExport"});
  const auto d = decide(hosts, p);
  EXPECT_EQ(d.kind, placement_kind::refused);
  EXPECT_EQ(d.missing_classes, (std::vector<std::string>{"Hunyuan3DLoader", "MeshExport"}));
  EXPECT_EQ(d.reason, "refused: no host has Hunyuan3DLoader, MeshExport");
}

TEST(placement, refusal_names_the_closest_host_when_classes_are_split_over_hosts) {
  std::vector<host_view> hosts = {host("host-1"), host("host-2")};
  hosts[0].node_classes.insert({"A", "B"});
  hosts[1].node_classes.insert("C");
  prompt_needs p = needs("p", {});
  p.node_classes.insert({"A", "B", "C"});
  const auto d = decide(hosts, p);
  EXPECT_EQ(d.kind, placement_kind::refused);
  EXPECT_EQ(d.missing_classes, std::vector<std::string>{"C"});
  EXPECT_EQ(d.reason, "refused: no host has all 6 node classes; the closest, host-1, lacks C");
}

TEST(placement, only_down_hosts_have_the_classes_so_the_prompt_waits) {
  std::vector<host_view> hosts = {host("host-1"), host("host-2")};
  hosts[0].node_classes.insert("X");
  hosts[0].up = false;
  prompt_needs p = needs("p", {});
  p.node_classes.insert("X");
  const auto d = decide(hosts, p);
  EXPECT_EQ(d.kind, placement_kind::wait);
  EXPECT_EQ(d.reason, "waiting: every host with the prompt's node classes is down");
}

TEST(placement, a_busy_host_is_never_chosen_even_when_warm) {
  std::vector<host_view> hosts = {host("host-1", {"sd15"}, true), host("host-2", {"sdxl"})};
  hosts[1].queued = 1;  // queued at the host counts as busy too
  const auto d = decide(hosts, needs("p", {"sd15"}));
  EXPECT_EQ(d.kind, placement_kind::wait);
  EXPECT_EQ(d.reason, "waiting: 1 warm host busy, no other host free");
}

TEST(placement, all_busy_and_none_warm_waits) {
  const auto d = decide({host("host-1", {}, true), host("host-2", {}, true)}, needs("p", {"sd15"}));
  EXPECT_EQ(d.kind, placement_kind::wait);
  EXPECT_EQ(d.reason, "waiting: all 2 capable hosts busy");
}

TEST(placement, no_warm_host_anywhere_loads_at_once_on_the_least_recently_used) {
  std::vector<host_view> hosts = {host("host-0", {"sd15"}), host("host-1", {"flux"})};
  hosts[0].last_used = 7;
  hosts[1].last_used = 9;
  const auto d = decide(hosts, needs("p", {"sdxl"}, 5), {}, 5);
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.host, "host-0");
  EXPECT_EQ(d.loads, std::vector<std::string>{"sdxl"});
  EXPECT_EQ(d.reason,
            "host-0: least recently used free host; loads sdxl, wanted by 1 waiting prompt; no "
            "host holds it");
}

TEST(placement, cold_hosts_tie_on_last_used_then_free_memory_then_name) {
  std::vector<host_view> hosts = {host("host-2"), host("host-1"), host("host-0")};
  hosts[2].last_used = 1;                    // host-0 used more recently than the others
  hosts[0].free_device_bytes = 12ull << 30;  // host-2: more free memory than host-1
  EXPECT_EQ(decide(hosts, needs("p", {"sdxl"})).host, "host-2");
  hosts[0].free_device_bytes = 8ull << 30;  // equal: by name
  EXPECT_EQ(decide(hosts, needs("p", {"sdxl"})).host, "host-1");
}

TEST(placement, a_cold_host_holding_part_of_the_prompt_comes_before_the_least_recently_used) {
  std::vector<host_view> hosts = {host("host-0"), host("host-1", {"sdxl"})};
  hosts[1].last_used = 50;
  const auto d = decide(hosts, needs("p", {"sdxl", "sdxl-refiner"}));
  EXPECT_EQ(d.host, "host-1");
  EXPECT_EQ(d.loads, std::vector<std::string>{"sdxl-refiner"});
  EXPECT_EQ(d.reason,
            "host-1: free host holding the most of its models; loads sdxl-refiner, wanted by 1 "
            "waiting prompt; no host holds it");
}

// A busy warm host for each waiting prompt of the model: they wait for it, however long, since
// each warm host takes one within a run of freeing.
TEST(placement, prompts_no_more_than_their_busy_warm_hosts_wait_for_them) {
  const std::vector<host_view> hosts = {host("host-1", {"sd15"}, true), host("host-2", {"sdxl"})};
  const prompt_needs p = needs("p", {"sd15"}, 10);
  const auto d = decide(hosts, p, {p}, 500);
  EXPECT_EQ(d.kind, placement_kind::wait);
  EXPECT_EQ(d.reason, "waiting: 1 warm host busy, enough for sd15's 1 waiting prompt");
}

// Rule 4 on the logical clock: more prompts of a model than its busy warm hosts, and a cold host
// free. They wait for the warm host while the window runs, and one loads cold once it has passed.
TEST(placement, busy_warm_host_is_waited_for_until_the_pressure_window_passes) {
  const std::vector<host_view> hosts = {host("host-1", {"sd15"}, true), host("host-2", {"sdxl"})};
  const std::vector<prompt_needs> queue = {needs("a", {"sd15"}, 10), needs("b", {"sd15"}, 10)};
  const placement_policy policy{.pressure_window = 3, .ticks_per_waiting_prompt = 10};
  auto at = [&](std::uint64_t now) { return place(hosts, fleet_fp, queue[0], queue, now, policy); };
  EXPECT_EQ(at(10).kind, placement_kind::wait);
  EXPECT_EQ(at(10).reason,
            "waiting: 1 warm host busy, the pressure window has not passed (0 of 3 ticks)");
  EXPECT_EQ(at(12).reason,
            "waiting: 1 warm host busy, the pressure window has not passed (2 of 3 ticks)");
  const auto d = at(13);
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.host, "host-2");
  EXPECT_EQ(d.loads, std::vector<std::string>{"sd15"});
  EXPECT_EQ(d.reason,
            "host-2: the one free host; loads sd15, wanted by 2 waiting prompts; 1 warm host busy "
            "past the 3-tick window");
}

// The window runs from the first waiting prompt of the model (SwarmUI's TimeFirstRequest), so a
// prompt queued late behind an older one of the same model does not restart it.
TEST(placement, the_window_runs_from_the_models_first_waiting_prompt) {
  const std::vector<host_view> hosts = {host("host-1", {"sd15"}, true), host("host-2")};
  const std::vector<prompt_needs> queue = {needs("old", {"sd15"}, 2), needs("new", {"sd15"}, 9)};
  const auto d = decide(hosts, queue[1], queue, 10);
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.reason,
            "host-2: the one free host; loads sd15, wanted by 2 waiting prompts; 1 warm host busy "
            "past the 8-tick window");
}

// One free cold host and two models pressing for it: the more wanted model gets it, the other
// prompt waits, whichever the gateway asks about first.
TEST(placement, the_most_wanted_model_gets_the_one_free_host) {
  const std::vector<host_view> hosts = {host("host-0", {}, true), host("host-1")};
  const std::vector<prompt_needs> queue = {needs("a", {"flux"}, 4), needs("b", {"sdxl"}, 5),
                                           needs("c", {"sdxl"}, 5), needs("d", {"sdxl"}, 6)};
  const auto flux = decide(hosts, queue[0], queue, 6);
  EXPECT_EQ(flux.kind, placement_kind::wait);
  EXPECT_EQ(flux.reason, "waiting: flux ranks 2 in pressure, with 1 free host to load on");
  const auto sdxl = decide(hosts, queue[1], queue, 6);
  EXPECT_EQ(sdxl.kind, placement_kind::run);
  EXPECT_EQ(sdxl.host, "host-1");
  EXPECT_EQ(sdxl.reason,
            "host-1: the one free host; loads sdxl, wanted by 3 waiting prompts; no host holds it");
}

// SwarmUI's heuristic: time waited counts too, so a lone prompt is not starved by a popular
// model; ten ticks of waiting are worth one more prompt.
TEST(placement, a_long_wait_outweighs_a_larger_count) {
  const std::vector<host_view> hosts = {host("host-0", {}, true), host("host-1")};
  const std::vector<prompt_needs> queue = {needs("a", {"flux"}, 0), needs("b", {"sdxl"}, 20),
                                           needs("c", {"sdxl"}, 20)};
  // flux: 1 * 10 + 21 = 31 against sdxl: 2 * 10 + 1 = 21.
  EXPECT_EQ(decide(hosts, queue[0], queue, 21).kind, placement_kind::run);
  EXPECT_EQ(decide(hosts, queue[1], queue, 21).kind, placement_kind::wait);
}

// Prompts that a free warm host will take press for no load.
TEST(placement, prompts_with_a_free_warm_host_add_no_pressure) {
  const std::vector<host_view> hosts = {host("host-0", {"sdxl"}), host("host-1")};
  const std::vector<prompt_needs> queue = {needs("a", {"flux"}, 5), needs("b", {"sdxl"}, 0),
                                           needs("c", {"sdxl"}, 0)};
  const auto d = decide(hosts, queue[0], queue, 5);
  EXPECT_EQ(d.kind, placement_kind::run);
  EXPECT_EQ(d.host, "host-1");  // host-0 is free but warm for sdxl; flux loads on host-1
  EXPECT_EQ(d.reason,
            "host-1: free host the fewest waiting prompts are warm on; loads flux, wanted by 1 "
            "waiting prompt; no host holds it");
}

TEST(placement, the_same_inputs_give_the_same_decision) {
  std::vector<host_view> hosts = {host("host-2", {"sdxl"}), host("host-0", {}, true),
                                  host("host-1", {"flux"})};
  const std::vector<prompt_needs> queue = {needs("a", {"sd15"}, 1), needs("b", {"sd15"}, 2),
                                           needs("c", {"flux"}, 2)};
  const auto first = decide(hosts, queue[0], queue, 4);
  std::reverse(hosts.begin(), hosts.end());  // the order the gateway lists hosts in: no matter
  for (int i = 0; i < 5; ++i) {
    const auto again = decide(hosts, queue[0], queue, 4);
    EXPECT_EQ(again.kind, first.kind);
    EXPECT_EQ(again.host, first.host);
    EXPECT_EQ(again.loads, first.loads);
    EXPECT_EQ(again.reason, first.reason);
  }
}

TEST(round_robin, takes_free_capable_hosts_in_turn_by_name) {
  std::vector<host_view> hosts = {host("host-2"), host("host-0", {"sd15"}), host("host-1")};
  round_robin rr;
  const prompt_needs p = needs("p", {"sd15"});
  EXPECT_EQ(rr.pick(hosts, fleet_fp, p).host, "host-0");
  EXPECT_EQ(rr.pick(hosts, fleet_fp, p).host, "host-1");
  hosts[0].running = true;  // host-2 busy: wraps to host-0
  EXPECT_EQ(rr.pick(hosts, fleet_fp, p).host, "host-0");
  const auto d = rr.pick(hosts, fleet_fp, p);
  EXPECT_EQ(d.host, "host-1");
  EXPECT_EQ(d.loads, std::vector<std::string>{"sd15"});
  EXPECT_EQ(d.reason, "host-1: next free host in turn");
}

TEST(round_robin, excludes_and_refuses_as_placement_does) {
  std::vector<host_view> hosts = {host("host-0"), host("host-1", {}, true)};
  hosts[0].fingerprint = "fp-b";
  round_robin rr;
  EXPECT_EQ(rr.pick(hosts, fleet_fp, needs("p", {})).reason, "waiting: all 1 capable host busy");
  prompt_needs p = needs("p", {});
  p.node_classes.insert("Missing");
  const auto d = rr.pick(hosts, fleet_fp, p);
  EXPECT_EQ(d.kind, placement_kind::refused);
  EXPECT_EQ(d.missing_classes, std::vector<std::string>{"Missing"});
}

}  // namespace
}  // namespace orch::fleet
