"""The fleet driver on a real Ray cluster of three nodes on this machine (docs/fleet.md, "The Ray
side"): real `ray start` nodes, real host actors, real `comfy-orch serve` processes, real kills.
Run inside a network namespace with only lo (tests/fleet/CMakeLists.txt does `unshare -n`) by
the Ray venv's Python; ORCH_FLEET_COMFY_ORCH names the comfy-orch binary.

The tests run in this file's order on one cluster and one driver (a cluster takes ten seconds to
start): each later test starts from the hosts the earlier ones left. Deadlines are hang guards,
never assertions about speed.

Where a host comes back after its node died: each node offers one unit of comfy_orch_host, so
the three hosts fill the three nodes and the lost host has nowhere to go until a replacement
node joins; it must then come up there."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_gateway import LOOPBACK, alive, listening_addresses  # noqa: E402
from ray_cluster import ray_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RAY_BIN = Path(sys.executable).parent
DEADLINE_S = 90.0  # hang guard for each awaited event
HOSTS = ["host-0", "host-1", "host-2"]

Event = dict[str, Any]


def comfy_orch() -> str:
    path = os.environ.get("ORCH_FLEET_COMFY_ORCH", "")
    if not os.access(path, os.X_OK):
        pytest.fail("ORCH_FLEET_COMFY_ORCH must name the comfy-orch binary (got %r)" % path)
    return path


def write_deployment(directory: Path) -> Path:
    """One native pack on a simulated GPU: each serve gets a card of its own (docs/sim-device.md),
    so three on one machine do not meet."""
    file = directory / "deployment.toml"
    file.write_text(
        '[host]\ndevice = "sim"\n\n[host.sim]\ncapacity = "1GiB"\npage_size = "2MiB"\n\n'
        '[packs]\npaths = ["%s"]\n\n[shm]\npinned_pool_size = "64MiB"\n'
        % (ROOT / "examples" / "packs" / "ComfyUI-ImageOps"))
    return file


class driver:
    """`python -m comfy_orch.fleet.driver` and the JSON lines it wrote, read as they come."""

    def __init__(self, args: list[str], stderr: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYTHONDONTWRITEBYTECODE="1")
        self._stderr = stderr
        self.process = subprocess.Popen(
            [sys.executable, "-m", "comfy_orch.fleet.driver", *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True, env=env)
        self.events: queue.Queue[Event] = queue.Queue()
        self.seen: list[Event] = []
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            self.events.put(json.loads(line))  # a line that is not JSON fails the reader's test

    def next(self, matches: Callable[[Event], bool], what: str) -> Event:
        """The next event that `matches`; the ones before it are kept in `seen`."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            try:
                event = self.events.get(timeout=max(0.0, left))
            except queue.Empty:
                pytest.fail("no %s in %.0f s; the driver wrote %s; its stderr ends:\n%s" % (
                    what, DEADLINE_S, self.seen, self._stderr.read_text()[-3000:]))
            self.seen.append(event)
            if matches(event):
                return event

    def ended(self) -> int:
        try:
            return self.process.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail("the driver did not exit")


class fleet_state:
    def __init__(self, cluster: ray_cluster, the_driver: driver) -> None:
        self.cluster = cluster
        self.driver = the_driver
        self.up: dict[str, Event] = {}  # each host's last host_up
        self.old_pids: list[int] = []


def http_get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.status, answer.read()


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while alive(pid):
        if time.monotonic() > deadline:
            pytest.fail("process %d still runs" % pid)
        time.sleep(0.1)


def session_of_parent(pid: int) -> int:
    """The session of the process's parent: for a serve, its actor's node's (ray_cluster)."""
    stat = Path("/proc/%d/stat" % pid).read_text()
    parent = int(stat[stat.rindex(")") + 2:].split()[1])
    return os.getsid(parent)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fleet_state]:
    directory = tmp_path_factory.mktemp("fleet")
    shm_before = set(os.listdir("/dev/shm"))
    cluster = ray_cluster(RAY_BIN, workers=2)
    the_driver: driver | None = None
    try:
        the_driver = driver(["--ray-address", cluster.address, "--hosts", "3", "--deployment",
                             str(write_deployment(directory)), "--comfy-orch", comfy_orch()],
                            directory / "driver.stderr")
        yield fleet_state(cluster, the_driver)
    finally:
        if the_driver is not None and the_driver.process.poll() is None:
            the_driver.process.kill()
            the_driver.process.wait()
        cluster.stop()
        assert cluster.left() == [], "processes of the Ray nodes outlived the cluster"
        if the_driver is not None:  # every serve ends with its actor (PR_SET_PDEATHSIG)
            for line in the_driver.lines:
                event = json.loads(line)
                if event["event"] == "host_up":
                    wait_gone(event["pid"])
        # The machine's budget ledger is shared by design and goes with its last user.
        left = [e for e in set(os.listdir("/dev/shm")) - shm_before
                if not e.startswith("comfy-orch-budget-")]
        assert left == [], "left in /dev/shm: %s" % left


def test_driver_brings_up_one_host_per_node_each_answering_object_info(
        fleet: fleet_state) -> None:
    for _ in HOSTS:
        event = fleet.driver.next(lambda e: e["event"] == "host_up", "host_up")
        fleet.up[event["host"]] = event
    assert sorted(fleet.up) == HOSTS
    assert len({e["node_id"] for e in fleet.up.values()}) == 3
    for event in fleet.up.values():
        assert event["node_ip"] == "127.0.0.1"
        assert event["restarts"] == 0
        assert event["url"].startswith("http://127.0.0.1:")
        status, body = http_get(event["url"] + "/object_info")
        assert status == 200 and "ImageChecksum" in json.loads(body)


def test_nothing_listens_beyond_loopback(fleet: fleet_state) -> None:
    assert fleet.up, "needs the hosts up"
    assert listening_addresses() <= LOOPBACK


def test_killed_serve_is_reported_down_then_up_again_with_a_new_process(
        fleet: fleet_state) -> None:
    before = fleet.up["host-0"]
    os.kill(before["pid"], signal.SIGKILL)
    down = fleet.driver.next(lambda e: e["host"] == "host-0", "host_down of host-0")
    assert down == {"event": "host_down", "host": "host-0", "node_id": before["node_id"],
                    "reason": "serve exited with code -9"}
    up = fleet.driver.next(lambda e: e["host"] == "host-0", "host_up of host-0")
    assert up["event"] == "host_up" and up["restarts"] == 1
    assert up["pid"] != before["pid"]
    assert http_get(up["url"] + "/object_info")[0] == 200
    fleet.up["host-0"] = up


def test_host_of_a_killed_node_is_down_and_up_again_on_the_replacement_node(
        fleet: fleet_state) -> None:
    workers = {n.process.pid: n for n in fleet.cluster.nodes[1:]}
    name, lost = next((h, e) for h, e in sorted(fleet.up.items())
                      if session_of_parent(e["pid"]) in workers)
    workers[session_of_parent(lost["pid"])].kill()
    down = fleet.driver.next(lambda e: e["host"] == name, "host_down of " + name)
    assert down["event"] == "host_down" and down["node_id"] == lost["node_id"]
    wait_gone(lost["pid"])  # its serve ended with its actor (PR_SET_PDEATHSIG)
    fleet.cluster.add_worker()
    up = fleet.driver.next(lambda e: e["host"] == name, "host_up of " + name)
    assert up["event"] == "host_up" and up["restarts"] == lost["restarts"] + 1
    assert up["node_id"] not in {e["node_id"] for e in fleet.up.values()}
    assert http_get(up["url"] + "/object_info")[0] == 200
    fleet.up[name] = up


def test_driver_stops_every_serve_and_exits_0_at_stdin_end(fleet: fleet_state) -> None:
    assert fleet.driver.process.stdin is not None
    fleet.driver.process.stdin.close()
    assert fleet.driver.ended() == 0
    for event in fleet.up.values():
        wait_gone(event["pid"])
    assert all(json.loads(line)["event"] in ("host_up", "host_down")
               for line in fleet.driver.lines)


def serve_environment(pid: int) -> dict[str, str]:
    raw = Path("/proc/%d/environ" % pid).read_bytes()
    return dict(e.split("=", 1) for e in raw.decode(errors="replace").split("\0") if "=" in e)


def test_hosts_given_gpus_serve_each_with_its_own_cuda_visible_devices(
        fleet: fleet_state, tmp_path: Path) -> None:
    # A node that declares two GPUs and room for two hosts; the nodes before it have none, so
    # both hosts must land there, one GPU each.
    fleet.cluster.add_worker(gpus=2, capacity=2)
    the_driver = driver(["--ray-address", fleet.cluster.address, "--hosts", "2",
                         "--gpus-per-host", "1", "--deployment", str(write_deployment(tmp_path)),
                         "--comfy-orch", comfy_orch()], tmp_path / "driver.stderr")
    try:
        ups = [the_driver.next(lambda e: e["event"] == "host_up", "host_up") for _ in range(2)]
        assert len({e["node_id"] for e in ups}) == 1, ups
        assert sorted(e["gpus"] for e in ups) == ["0", "1"], ups
        for e in ups:
            assert serve_environment(e["pid"])["CUDA_VISIBLE_DEVICES"] == e["gpus"]
            assert http_get(e["url"] + "/object_info")[0] == 200
        assert the_driver.process.stdin is not None
        the_driver.process.stdin.close()
        assert the_driver.ended() == 0
        for e in ups:
            wait_gone(e["pid"])
    finally:
        if the_driver.process.poll() is None:
            the_driver.process.kill()
            the_driver.process.wait()


def test_unreachable_ray_address_is_an_error_line_naming_it_and_exit_1(
        tmp_path: Path) -> None:
    address = "127.0.0.1:9"  # discard: nothing listens there in this namespace
    the_driver = driver(["--ray-address", address, "--hosts", "1", "--deployment",
                         str(write_deployment(tmp_path)), "--comfy-orch", comfy_orch()],
                        tmp_path / "driver.stderr")
    assert the_driver.ended() == 1
    event = the_driver.next(lambda e: True, "error line")
    assert event["event"] == "error" and address in event["message"]
    assert "ray start" in event["message"]
    assert len(the_driver.lines) == 1
