"""`comfy-orch gateway` over a real Ray cluster of three nodes on this machine (docs/fleet.md, "The
gateway"): the gateway runs the Ray driver itself (its [ray] source), the driver's host actors
start real `comfy-orch serve` hosts with the fleet's secret, prompts go through the gateway's
queue to them, and the kill drill: a host's serve killed with SIGKILL, and then a Ray node
killed with every process of it, each while a node of a prompt runs there and other prompts
wait. The prompt that ran there ends with comfy_orch.HostLost naming the host, every other prompt
finishes elsewhere, and the host returns when Ray restarts it (on a replacement node for the
node removed). At the end no process of the cluster or the fleet is left, nothing new in
/dev/shm, and nothing ever listened beyond loopback. Run inside a network namespace with only lo
(tests/fleet/CMakeLists.txt does `unshare -n`) by the Ray venv's Python (fleet_gateway.py says
which binaries).

The tests run in this file's order on one cluster and one gateway. Deadlines are hang guards,
never assertions about speed."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_gateway import (LOOPBACK, QUICK, alive, gateway, listening_addresses,  # noqa: E402
                           sleep_prompt, write_fleet)
from ray_cluster import ray_cluster  # noqa: E402

RAY_BIN = Path(sys.executable).parent


class fleet_state:
    def __init__(self, cluster: ray_cluster, g: gateway) -> None:
        self.cluster = cluster
        self.gateway = g
        self.serve_pids: set[int] = set()
        self.drills = 0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fleet_state]:
    directory = tmp_path_factory.mktemp("gateway")
    shm_before = set(os.listdir("/dev/shm"))
    cluster = ray_cluster(RAY_BIN, workers=2)
    state: fleet_state | None = None
    try:
        g = gateway(write_fleet(directory, cluster.address), directory / "gateway.stderr")
        state = fleet_state(cluster, g)
        yield state
    finally:
        if state is not None and state.gateway.process.poll() is None:
            state.gateway.process.kill()
            state.gateway.process.wait()
        cluster.stop()
    # The drill's end: nothing of the cluster or the fleet is left.
    assert cluster.left() == [], "processes of the Ray nodes outlived the cluster"
    assert state is not None
    assert not [pid for pid in state.serve_pids if alive(pid)], "a serve outlived its host"
    # The machine's budget ledger is shared by design and goes with its last user.
    left = [e for e in set(os.listdir("/dev/shm")) - shm_before
            if not e.startswith("comfy-orch-budget-")]
    assert left == [], "left in /dev/shm: %s" % left


def test_the_hosts_ray_starts_come_up_at_the_gateway_with_one_fingerprint(
        fleet: fleet_state) -> None:
    hosts = fleet.gateway.wait_hosts_up(3)
    assert sorted(hosts) == ["host-0", "host-1", "host-2"]
    assert len({h["fingerprint"] for h in hosts.values()}) == 1
    assert all(h["pid"] for h in hosts.values())
    fleet.serve_pids |= {h["pid"] for h in hosts.values()}


def test_nothing_listens_beyond_loopback(fleet: fleet_state) -> None:
    assert len(fleet.gateway.up_hosts()) == 3, "needs the gateway and its hosts up"
    assert listening_addresses() <= LOOPBACK


def test_prompts_run_on_more_than_one_host(fleet: fleet_state) -> None:
    g = fleet.gateway
    ids = [g.queue(sleep_prompt(300)) for _ in range(6)]
    for prompt_id in ids:
        assert g.finished(prompt_id)["status"]["status_str"] == "success"
    ran_on = {g.run_decision(prompt_id)["host"] for prompt_id in ids}
    assert len(ran_on) >= 2, ran_on


def session_of_parent(pid: int) -> int:
    """The session of the process's parent: for a serve, its actor's node's (ray_cluster)."""
    stat = Path("/proc/%d/stat" % pid).read_text()
    parent = int(stat[stat.rindex(")") + 2:].split()[1])
    return os.getsid(parent)


def drill(fleet: fleet_state, choose: Callable[[dict[str, Any]], bool],
          kill: Callable[[dict[str, Any]], None]) -> None:
    """Three long prompts, one a host, a node of each running, and two quick ones waiting; `kill`
    takes away the first host (in name order) that `choose` accepts. Its prompt ends naming the
    host; every other one finishes; the host comes back with a new serve and runs prompts
    again."""
    g = fleet.gateway
    # Sleeps no host has run before: a host answers a prompt it has run from its cache.
    fleet.drills += 1
    long_ones = [g.queue(sleep_prompt(8000 + 10 * fleet.drills + i)) for i in range(3)]
    waiting = [g.queue(QUICK) for _ in range(2)]

    def running_with_a_node() -> list[dict[str, Any]] | None:
        hosts = [h for h in g.fleet()["hosts"] if h["running_node_started"]]
        return hosts if len(hosts) == 3 else None

    host = next(h for h in g.wait(running_with_a_node, "a node of each long prompt running")
                if choose(h))
    victim = host["running"]
    kill(host)

    lost = g.finished(victim)
    assert lost["status"]["status_str"] == "error"
    error = dict(lost["status"]["messages"])["execution_error"]
    assert error["exception_type"] == "comfy_orch.HostLost"
    assert host["name"] in error["exception_message"]
    for prompt_id in [p for p in long_ones if p != victim] + waiting:
        assert g.finished(prompt_id)["status"]["status_str"] == "success", prompt_id
    back = g.wait(lambda: (h := g.up_hosts().get(host["name"])) and h["pid"] != host["pid"] and h,
                  host["name"] + " up again")
    fleet.serve_pids |= {back["pid"]}
    again = [g.queue(QUICK) for _ in range(3)]
    for prompt_id in again:
        assert g.finished(prompt_id)["status"]["status_str"] == "success"


def test_a_host_killed_mid_prompt_ends_it_naming_the_host_and_returns_when_ray_restarts_it(
        fleet: fleet_state) -> None:
    drill(fleet, lambda host: True, lambda host: os.kill(host["pid"], signal.SIGKILL))


def test_a_ray_node_removed_mid_prompt_ends_its_hosts_prompt_and_the_host_returns_elsewhere(
        fleet: fleet_state) -> None:
    # A worker node's host (the head's would take the cluster with it). Each node offers one
    # host: the host has nowhere to go until the replacement node joins.
    workers = {n.process.pid: n for n in fleet.cluster.nodes[1:] if n.process.poll() is None}

    def remove_its_node(host: dict[str, Any]) -> None:
        workers[session_of_parent(host["pid"])].kill()
        fleet.cluster.add_worker()

    drill(fleet, lambda host: session_of_parent(host["pid"]) in workers, remove_its_node)


def test_the_gateways_stop_stops_the_driver_and_every_host(fleet: fleet_state) -> None:
    g = fleet.gateway
    assert g.stop() == 0
    g.wait(lambda: not any(alive(pid) for pid in fleet.serve_pids), "every serve gone")
