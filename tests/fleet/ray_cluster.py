"""A Ray cluster of real nodes on this machine, for the fleet tests (docs/fleet.md): a head and
worker nodes, all on 127.0.0.1. It must run inside a network namespace of its own (`unshare -n`,
with lo up), where the GCS port is free and where nothing the nodes open can be reached from
outside.

Each node is `ray start --block` as a child in a session of its own: its raylet and agents
stay in its process group, and the workers the raylet starts (each in a group of its own) in its
session, so SIGKILL to every process of the session takes the node away as a machine's death
would, and stop() ends every session it started. (A host actor's serve starts a session of its
own: it must end because its actor died, not because the test killed it.) It never runs
`ray stop`: that ends every Ray process of the machine, whoever started it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

GCS_PORT = 6379
READY = "Ray runtime started."  # what `ray start` prints once its node has joined
START_TIMEOUT_S = 90.0  # hang guard only


class node:
    """One `ray start --block` and what it printed."""

    def __init__(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, errors="replace",
                                        env=env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if READY in line:
                self._ready.set()
        self._ready.set()

    def wait_ready(self) -> None:
        if not self._ready.wait(START_TIMEOUT_S) or self.process.poll() is not None:
            raise RuntimeError("ray node %s did not start:\n%s" % (self.name,
                                                                   "\n".join(self.lines[-30:])))

    def kill(self) -> None:
        """SIGKILL to every process of the node's session, as a machine that dies."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            left = session_members({self.process.pid})
            if not left or time.monotonic() > deadline:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        self.process.wait()


def session_members(sessions: set[int]) -> list[int]:
    """The live processes of these sessions (zombies are dead: their parent reaps them)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc/%s/stat" % entry).read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
        if fields[0] != "Z" and int(fields[3]) in sessions:
            found.append(int(entry))
    return found


class ray_cluster:
    """A head and `workers` worker nodes; each offers one CPU and `host_capacity` (the head:
    `head_capacity`) units of the resource comfy_orch_host."""

    def __init__(self, ray_bin: Path, workers: int = 2, head_capacity: int = 1,
                 host_capacity: int = 1, resource: str = "comfy_orch_host") -> None:
        self._ray = str(ray_bin / "ray")
        self._resource = resource
        self._host_capacity = host_capacity
        # Short: Ray's Unix sockets live under it (107 bytes).
        self.temp_dir = tempfile.mkdtemp(prefix="fleet-", dir="/tmp")
        self._env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        self._shm_before = set(os.listdir("/dev/shm"))
        self.nodes: list[node] = []
        self.address = "127.0.0.1:%d" % GCS_PORT
        try:
            self._start("head", ["--head", "--port=%d" % GCS_PORT, "--include-dashboard=false",
                                 "--temp-dir=%s" % self.temp_dir], head_capacity)
            for _ in range(workers):
                self.add_worker()
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, extra: list[str], capacity: int, gpus: int = 0) -> node:
        # GPUs a node declares are Ray's to hand out (num_gpus, CUDA_VISIBLE_DEVICES): none need
        # exist.
        command = [self._ray, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                   "--num-gpus=%d" % gpus,
                   "--resources=%s" % json.dumps({self._resource: capacity}),
                   "--disable-usage-stats", *extra]
        started = node(name, command, self._env)
        self.nodes.append(started)
        started.wait_ready()
        return started

    def add_worker(self, gpus: int = 0, capacity: int | None = None) -> node:
        """A worker node that offers `capacity` hosts (default the cluster's) and declares
        `gpus` GPUs."""
        return self._start("worker-%d" % (len(self.nodes)), ["--address=%s" % self.address],
                           self._host_capacity if capacity is None else capacity, gpus)

    def left(self) -> list[int]:
        """The live processes of the nodes' sessions."""
        return session_members({n.process.pid for n in self.nodes})

    def stop(self) -> None:
        """Every node's session killed (a test cluster keeps nothing worth a graceful stop), then
        the temporary directory and any /dev/shm entry the nodes made."""
        for n in reversed(self.nodes):
            n.kill()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        for entry in set(os.listdir("/dev/shm")) - self._shm_before:
            if "ray" in entry.lower() or "plasma" in entry.lower():
                try:
                    os.unlink(os.path.join("/dev/shm", entry))
                except OSError:
                    pass
