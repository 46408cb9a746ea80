"""`comfy-orch gateway` over a real Ray cluster of three nodes on this machine (docs/fleet.md, "The
gateway"): the gateway runs the Ray driver itself (its [ray] source), the driver's host actors
start real `comfy-orch serve` hosts with the fleet's secret, prompts go through the gateway's
queue to them, and a host killed with SIGKILL while a node of its prompt runs ends that prompt
with comfy_orch.HostLost naming it, the others finish, and the host returns when Ray restarts
it. Run inside a network namespace with only lo (tests/fleet/CMakeLists.txt does `unshare -n`)
by the Ray venv's Python; ORCH_FLEET_COMFY_ORCH names the comfy-orch binary and
ORCH_FLEET_TEST_PACKS the directory of the test nodes' library (TestSleep).

The tests run in this file's order on one cluster and one gateway. Deadlines are hang guards,
never assertions about speed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ray_cluster import ray_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RAY_BIN = Path(sys.executable).parent
DEADLINE_S = 120.0  # hang guard for each awaited state
SECRET = "fleet-gateway-test-secret-0123456789abcdefghijklmnopqrstuvwxyz"


def env_path(name: str) -> Path:
    value = os.environ.get(name, "")
    if not value or not os.path.exists(value):
        pytest.fail("%s must name an existing path (got %r)" % (name, value))
    return Path(value)


def write_fleet(directory: Path, address: str) -> Path:
    """The deployment every host serves (the ImageOps example pack and the test nodes, on a sim
    card of its own each), the fleet's secret, and the fleet file over the Ray cluster."""
    comfy_orch = env_path("ORCH_FLEET_COMFY_ORCH")
    nodes = directory / "packs" / "ComfyUI-TestNodes" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "comfy-env.toml").write_text('[worker]\nlibrary = "liborch_pack_test_nodes.so"\n')
    deployment = directory / "deployment.toml"
    deployment.write_text(
        '[host]\ndevice = "sim"\n\n[host.sim]\ncapacity = "1GiB"\npage_size = "2MiB"\n\n'
        '[packs]\npaths = ["%s", "%s"]\nlibrary_paths = ["%s", "%s"]\n\n'
        '[shm]\npinned_pool_size = "64MiB"\n'
        % (ROOT / "examples" / "packs" / "ComfyUI-ImageOps", directory / "packs" / "ComfyUI-TestNodes",
           comfy_orch.parent.parent / "examples", env_path("ORCH_FLEET_TEST_PACKS")))
    secret = directory / "fleet.secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    fleet = directory / "fleet.toml"
    fleet.write_text(
        '[gateway]\nsecret_file = "fleet.secret"\n\n[ray]\naddress = "%s"\npython = "%s"\n'
        'hosts = 3\ndeployment = "deployment.toml"\ncomfy_orch = "%s"\n'
        % (address, sys.executable, comfy_orch))
    return fleet


class gateway:
    """`comfy-orch gateway FLEET --port 0`, its port read from its 'listening on' line."""

    def __init__(self, fleet: Path, stderr: Path) -> None:
        self.process = subprocess.Popen(
            [str(env_path("ORCH_FLEET_COMFY_ORCH")), "gateway", str(fleet), "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True)
        self.stderr = stderr
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "listening on http://" not in line:
            pytest.fail("the gateway did not listen: %r; its stderr:\n%s" % (
                line, stderr.read_text()[-3000:]))
        self.base = line.strip().rsplit(" ", 1)[-1]

    def call(self, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                text = answer.read()
                return answer.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def fleet(self) -> dict[str, Any]:
        return self.call("/orch/fleet")[1]

    def queue(self, prompt: dict[str, Any]) -> str:
        status, answer = self.call("/prompt", {"prompt": prompt, "client_id": "ray-test"})
        assert status == 200, answer
        return answer["prompt_id"]

    def history_of(self, prompt_id: str) -> dict[str, Any] | None:
        return self.call("/history/" + prompt_id)[1].get(prompt_id)

    def wait(self, ready: Callable[[], Any], what: str) -> Any:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            value = ready()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail("no %s in %.0f s; /orch/fleet: %s; the gateway's stderr ends:\n%s" % (
                    what, DEADLINE_S, json.dumps(self.fleet()), self.stderr.read_text()[-4000:]))
            time.sleep(0.1)

    def finished(self, prompt_id: str) -> dict[str, Any]:
        return self.wait(lambda: self.history_of(prompt_id), "history entry of " + prompt_id)


def sleep_prompt(ms: int) -> dict[str, Any]:
    return {"1": {"class_type": "TestSleep", "inputs": {"ms": ms}}}


QUICK = {"1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
         "4": {"class_type": "ImageChecksum", "inputs": {"image": ["1", 0]}}}


def up_hosts(g: gateway) -> dict[str, dict[str, Any]]:
    return {h["name"]: h for h in g.fleet()["hosts"] if h["up"] and h["refused"] is None}


def alive(pid: int) -> bool:
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


class fleet_state:
    def __init__(self, cluster: ray_cluster, g: gateway) -> None:
        self.cluster = cluster
        self.gateway = g
        self.serve_pids: set[int] = set()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fleet_state]:
    directory = tmp_path_factory.mktemp("gateway")
    cluster = ray_cluster(RAY_BIN, workers=2)
    g: gateway | None = None
    try:
        g = gateway(write_fleet(directory, cluster.address), directory / "gateway.stderr")
        yield fleet_state(cluster, g)
    finally:
        if g is not None and g.process.poll() is None:
            g.process.kill()
            g.process.wait()
        cluster.stop()


def test_the_hosts_ray_starts_come_up_at_the_gateway_with_one_fingerprint(
        fleet: fleet_state) -> None:
    hosts = fleet.gateway.wait(lambda: len(up_hosts(fleet.gateway)) == 3 and up_hosts(fleet.gateway),
                               "three hosts up")
    assert sorted(hosts) == ["host-0", "host-1", "host-2"]
    assert len({h["fingerprint"] for h in hosts.values()}) == 1
    assert all(h["pid"] for h in hosts.values())
    fleet.serve_pids |= {h["pid"] for h in hosts.values()}


def test_prompts_run_on_more_than_one_host(fleet: fleet_state) -> None:
    g = fleet.gateway
    ids = [g.queue(sleep_prompt(300)) for _ in range(6)]
    for prompt_id in ids:
        assert g.finished(prompt_id)["status"]["status_str"] == "success"
    ran_on = {d["host"] for d in g.fleet()["decisions"]
              if d["decision"] == "run" and d["prompt_id"] in ids}
    assert len(ran_on) >= 2, ran_on


def test_a_host_killed_mid_prompt_ends_it_naming_the_host_and_returns_when_ray_restarts_it(
        fleet: fleet_state) -> None:
    g = fleet.gateway
    long_ones = [g.queue(sleep_prompt(8000)) for _ in range(3)]
    waiting = [g.queue(QUICK) for _ in range(2)]

    def running_with_a_node() -> dict[str, Any] | None:
        hosts = {h["running"]: h for h in g.fleet()["hosts"] if h["running_node_started"]}
        return hosts if len(hosts) == 3 else None

    by_prompt = g.wait(running_with_a_node, "a node of each long prompt running")
    victim = long_ones[1]
    host = by_prompt[victim]
    os.kill(host["pid"], signal.SIGKILL)

    lost = g.finished(victim)
    assert lost["status"]["status_str"] == "error"
    error = dict(lost["status"]["messages"])["execution_error"]
    assert error["exception_type"] == "comfy_orch.HostLost"
    assert host["name"] in error["exception_message"]
    for prompt_id in [long_ones[0], long_ones[2], *waiting]:
        assert g.finished(prompt_id)["status"]["status_str"] == "success", prompt_id
    # Ray restarts the host's actor, which starts a new serve: the gateway takes it back.
    back = g.wait(lambda: (h := up_hosts(g).get(host["name"])) and h["pid"] != host["pid"] and h,
                  host["name"] + " up again")
    fleet.serve_pids |= {back["pid"]}
    again = [g.queue(QUICK) for _ in range(3)]
    for prompt_id in again:
        assert g.finished(prompt_id)["status"]["status_str"] == "success"


def test_the_gateways_stop_stops_the_driver_and_every_host(fleet: fleet_state) -> None:
    g = fleet.gateway
    g.process.send_signal(signal.SIGTERM)
    assert g.process.wait(DEADLINE_S) == 0
    deadline = time.monotonic() + DEADLINE_S
    while any(alive(pid) for pid in fleet.serve_pids):
        assert time.monotonic() < deadline, "a serve outlived the gateway: %s" % [
            pid for pid in fleet.serve_pids if alive(pid)]
        time.sleep(0.1)
