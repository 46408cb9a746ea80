"""A `comfy-orch gateway` over a Ray cluster, for the fleet tests and the fleet benchmark
(docs/fleet.md): the deployment every host serves (the ImageOps example pack and the test nodes,
each host on a sim card of its own), the fleet's secret, the fleet file, and the gateway process
with the calls the tests make. ORCH_FLEET_COMFY_ORCH names the comfy-orch binary and
ORCH_FLEET_TEST_PACKS the directory of the test nodes' library (TestSleep, TestCheckpointLoader).
Deadlines are hang guards, never assertions about speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 120.0  # hang guard for each awaited state
SECRET = "fleet-gateway-test-secret-0123456789abcdefghijklmnopqrstuvwxyz"
# A sim card that holds two of TestCheckpointLoader's 4 MiB models beside the 256 MiB of headroom
# the memory manager keeps free: loading a third evicts the least recently used.
TWO_MODEL_CARD = "266MiB"


class setup_error(Exception):
    pass


def env_path(name: str) -> Path:
    value = os.environ.get(name, "")
    if not value or not os.path.exists(value):
        raise setup_error("%s must name an existing path (got %r)" % (name, value))
    return Path(value)


def write_fleet(directory: Path, address: str, hosts: int = 3, capacity: str = TWO_MODEL_CARD,
                gateway_lines: str = "") -> Path:
    """The deployment, the secret and the fleet file over the Ray cluster at `address`."""
    directory.mkdir(parents=True, exist_ok=True)
    comfy_orch = env_path("ORCH_FLEET_COMFY_ORCH")
    nodes = directory / "packs" / "ComfyUI-TestNodes" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (nodes / "comfy-env.toml").write_text('[worker]\nlibrary = "liborch_pack_test_nodes.so"\n')
    deployment = directory / "deployment.toml"
    deployment.write_text(
        '[host]\ndevice = "sim"\n\n[host.sim]\ncapacity = "%s"\npage_size = "2MiB"\n\n'
        '[packs]\npaths = ["%s", "%s"]\nlibrary_paths = ["%s", "%s"]\n\n'
        '[shm]\npinned_pool_size = "64MiB"\n'
        % (capacity, ROOT / "examples" / "packs" / "ComfyUI-ImageOps",
           directory / "packs" / "ComfyUI-TestNodes", comfy_orch.parent.parent / "examples",
           env_path("ORCH_FLEET_TEST_PACKS")))
    secret = directory / "fleet.secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    fleet = directory / "fleet.toml"
    fleet.write_text(
        '[gateway]\nsecret_file = "fleet.secret"\n%s\n[ray]\naddress = "%s"\npython = "%s"\n'
        'hosts = %d\ndeployment = "deployment.toml"\ncomfy_orch = "%s"\n'
        % (gateway_lines, address, sys.executable, hosts, comfy_orch))
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
            self.process.kill()
            self.process.wait()
            raise setup_error("the gateway did not listen: %r; its stderr:\n%s" % (
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
                try:
                    fleet_doc = json.dumps(self.fleet())
                except OSError as e:  # the gateway has stopped
                    fleet_doc = "unreadable (%s)" % e
                raise AssertionError("no %s in %.0f s; /orch/fleet: %s; the gateway's stderr "
                                     "ends:\n%s" % (what, DEADLINE_S, fleet_doc,
                                                    self.stderr.read_text()[-4000:]))
            time.sleep(0.02)

    def finished(self, prompt_id: str) -> dict[str, Any]:
        return self.wait(lambda: self.history_of(prompt_id), "history entry of " + prompt_id)

    def up_hosts(self) -> dict[str, dict[str, Any]]:
        return {h["name"]: h for h in self.fleet()["hosts"] if h["up"] and h["refused"] is None}

    def wait_hosts_up(self, count: int) -> dict[str, dict[str, Any]]:
        return self.wait(lambda: len(hosts := self.up_hosts()) == count and hosts,
                         "%d hosts up" % count)

    def run_decision(self, prompt_id: str) -> dict[str, Any]:
        """Placement's run decision for the prompt (the last, if it ran more than once)."""
        found = [d for d in self.fleet()["decisions"]
                 if d["prompt_id"] == prompt_id and d["decision"] == "run"]
        assert found, "no run decision for %s" % prompt_id
        return found[-1]

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(DEADLINE_S)


def sleep_prompt(ms: int) -> dict[str, Any]:
    return {"1": {"class_type": "TestSleep", "inputs": {"ms": ms}}}


def loader_prompt(model: str, ms: int = 0) -> dict[str, Any]:
    """A prompt whose loader names `model` (a checkpoint), then sleeps `ms` as a sampler would."""
    prompt: dict[str, Any] = {"1": {"class_type": "TestCheckpointLoader",
                                    "inputs": {"ckpt_name": model}}}
    if ms:
        prompt["2"] = {"class_type": "TestSleep", "inputs": {"ms": ms}}
    return prompt


QUICK = {"1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
         "4": {"class_type": "ImageChecksum", "inputs": {"image": ["1", 0]}}}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def listening_addresses() -> set[str]:
    """The local addresses of every listening TCP socket in this network namespace, as
    /proc/net/tcp{,6} write them."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for row in f:
                fields = row.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    found.add(fields[1].rsplit(":", 1)[0])
    return found


# 127.0.0.1, ::1 and ::ffff:127.0.0.1, as /proc/net/tcp{,6} write them
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
