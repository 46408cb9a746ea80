"""The fleet's driver (docs/fleet.md, "The Ray side"):

    python -m comfy_orch.fleet.driver --ray-address ADDR --hosts N --deployment PATH
        --comfy-orch PATH [--secret-file PATH] [--resource NAME] [--gpus-per-host G]

connects to a running Ray cluster, creates the host actors host-0 .. host-N-1 (one per unit of
the resource a node offers, comfy_orch_host unless --resource says otherwise; with
--gpus-per-host, each also takes G of the node's GPUs, and Ray sets its CUDA_VISIBLE_DEVICES,
which its serve inherits) and writes one JSON object
per line to stdout, flushed, and nothing else there:

    {"event": "host_up", "host", "node_id", "node_ip", "url", "pid", "gpus", "restarts"}
    {"event": "host_down", "host", "node_id", "reason"}
    {"event": "error", "message"}       (fatal: the driver then exits 1)

Ray detects failures: each host's wait() call ends with serve's exit code, or fails when the
actor's process or node dies; the driver keeps no heartbeat of its own. After host_down it asks
the host for its URL again, which Ray answers once it has restarted the actor (on a node with
the resource free), and says host_up with `restarts` one more. It stops on stdin's EOF or SIGTERM:
it stops every host's serve, kills the actors and exits 0. Ray's own log goes to stderr."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

NAMESPACE = "comfy-orch-fleet"  # the host actors' names are unique in it
RETRY_S = 0.5  # between asking a host that is going down or restarting for its URL again
# Hang guard on the hosts' stop() at the end: past each host's own grace (STOP_GRACE_S, 10 s, then
# SIGKILL), within the 20 s the gateway gives the driver to stop (host_source.hpp).
STOP_TIMEOUT_S = 15.0
PROBE_TIMEOUT_S = 10.0


class fatal(Exception):
    """An error the driver reports as its "error" line before exiting 1."""


@dataclass
class host:
    name: str
    actor: Any
    up: bool = False
    ever_up: bool = False
    restarts: int = 0
    node_id: str = ""
    retry_at: float = 0.0  # when to ask again for its URL (while down)
    pending: Any = None  # the ObjectRef of its describe() or wait() in flight
    kind: str = ""  # "describe" or "wait"


class protocol:
    """The JSON lines on the driver's own stdout; everything else the process (Ray included)
    writes to file descriptor 1 goes to stderr instead."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out: TextIO = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        self._lock = threading.Lock()

    def emit(self, **event: Any) -> None:
        with self._lock:
            self._out.write(json.dumps(event) + "\n")
            self._out.flush()


class arguments(argparse.ArgumentParser):
    """Its errors are the driver's "error" line, as every other failure is."""

    def error(self, message: str) -> Any:
        raise fatal("%s: %s (see --help)" % (self.prog, message))


def parse(argv: list[str]) -> argparse.Namespace:
    p = arguments(prog="python -m comfy_orch.fleet.driver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ray-address", required=True, help="the Ray cluster's GCS, HOST:PORT")
    p.add_argument("--hosts", type=int, required=True, help="how many comfy-orch hosts")
    p.add_argument("--deployment", required=True, help="the deployment file, the same path on "
                   "every node")
    p.add_argument("--comfy-orch", required=True, help="the comfy-orch binary on every node")
    p.add_argument("--secret-file", help="passed to serve as --fleet-secret-file")
    p.add_argument("--resource", default="comfy_orch_host",
                   help="the custom resource a node offers one unit of per host it may run")
    p.add_argument("--gpus-per-host", type=int, default=0,
                   help="GPUs Ray gives each host (CUDA_VISIBLE_DEVICES); default none")
    args = p.parse_args(argv)
    if args.hosts < 1:
        p.error("--hosts must be at least 1")
    if args.gpus_per_host < 0:
        p.error("--gpus-per-host must be 0 or more")
    return args


def connect(address: str) -> None:
    try:
        import ray
    except ImportError as e:
        raise fatal("this Python (%s) has no Ray: run the driver with the Ray venv's, "
                    ".deps/ray/bin/python (scripts/install-deps makes it)" % sys.executable) from e
    # ray.init() waits on an address that does not answer for minutes, retrying; a TCP connect
    # to the GCS port first says at once that nothing listens there.
    host_name, _, port = address.rpartition(":")
    try:
        socket.create_connection((host_name, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except (OSError, ValueError) as e:
        raise fatal(unreachable(address, first_line(e))) from e
    try:
        # The actors' processes import comfy_orch.fleet from the folder this driver's comfy_orch
        # is in: each node has comfy-orch installed at the same path (docs/fleet.md).
        package_root = str(Path(__file__).resolve().parents[2])
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=True,
                 logging_level="WARNING", configure_logging=True,
                 job_config=ray.job_config.JobConfig(code_search_path=[package_root]))
    except Exception as e:  # Ray raises ConnectionError, RuntimeError or its own kinds here
        raise fatal(unreachable(address, first_line(e))) from e


def unreachable(address: str, why: str) -> str:
    return ("cannot reach the Ray cluster at %s (%s); start its head there with `ray start --head "
            "--port=PORT` and each node with `ray start --address=%s "
            "--resources='{\"comfy_orch_host\": 1}'`, or give the head's address to "
            "--ray-address" % (address, why, address))


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return "%s: %s" % (type(e).__name__, text.splitlines()[0] if text else "")


class fleet:
    def __init__(self, args: argparse.Namespace, out: protocol, stop: threading.Event) -> None:
        from . import host_actor

        self._out = out
        self._stop = stop
        self._hosts: list[host] = []
        for i in range(args.hosts):
            name = "host-%d" % i
            try:
                actor = host_actor.start_host(name, os.path.abspath(args.comfy_orch),
                                              os.path.abspath(args.deployment),
                                              None if args.secret_file is None
                                              else os.path.abspath(args.secret_file),
                                              args.resource, args.gpus_per_host)
            except ValueError as e:  # the name is taken: another driver in this namespace
                raise fatal("cannot create %s in Ray namespace %s: %s" % (
                    name, NAMESPACE, first_line(e))) from e
            self._hosts.append(host(name, actor))

    def run(self) -> None:
        import ray

        for h in self._hosts:
            self._ask_url(h)
        while not self._stop.is_set():
            now = time.monotonic()
            for h in self._hosts:
                if h.pending is None and now >= h.retry_at:
                    self._ask_url(h)
            refs = [h.pending for h in self._hosts if h.pending is not None]
            if not refs:
                self._stop.wait(RETRY_S)
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=RETRY_S)
            for ref in ready:
                self._answered(next(h for h in self._hosts
                                    if h.pending is not None and h.pending == ref), ref)

    def _ask_url(self, h: host) -> None:
        h.pending, h.kind = h.actor.describe.remote(), "describe"

    def _answered(self, h: host, ref: Any) -> None:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        kind, h.pending = h.kind, None
        try:
            value = ray.get(ref)
        except RayActorError as e:  # the actor's process or node died: Ray restarts it
            self._down(h, "actor died: " + first_line(e))
            h.retry_at = time.monotonic() + (0 if kind == "wait" else RETRY_S)
            return
        except RayTaskError as e:  # describe(): serve exited or never listened
            cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else e
            if not h.ever_up:
                raise fatal("%s did not come up: %s" % (h.name, str(cause).strip())) from e
            self._down(h, str(cause).strip().splitlines()[0])
            h.retry_at = time.monotonic() + RETRY_S
            return
        if kind == "wait":
            self._down(h, "serve exited with code %s" % value)
            h.retry_at = time.monotonic() + RETRY_S  # the old actor answers until it exits
            return
        if not h.up:
            if h.ever_up:
                h.restarts += 1
            h.up, h.ever_up, h.node_id = True, True, value["node_id"]
            self._out.emit(event="host_up", host=h.name, node_id=value["node_id"],
                           node_ip=value["node_ip"], url=value["url"], pid=value["pid"],
                           gpus=value["gpus"], restarts=h.restarts)
        h.pending, h.kind = h.actor.wait.remote(), "wait"

    def _down(self, h: host, reason: str) -> None:
        if h.up:
            h.up = False
            self._out.emit(event="host_down", host=h.name, node_id=h.node_id, reason=reason)

    def stop(self) -> None:
        """Every host's serve stopped (SIGTERM, then SIGKILL after its grace), then the actors
        killed without restart."""
        import ray

        stops = [h.actor.stop.remote() for h in self._hosts]
        ray.wait(stops, num_returns=len(stops), timeout=STOP_TIMEOUT_S)
        for h in self._hosts:
            ray.kill(h.actor, no_restart=True)


def watch_stdin(stop: threading.Event) -> None:
    """Sets `stop` at stdin's end (its writer closed it, or went away)."""
    def read() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=read, name="stdin", daemon=True).start()


def main(argv: list[str]) -> int:
    out = protocol()
    stop = threading.Event()
    watch_stdin(stop)
    the_fleet: fleet | None = None
    try:
        args = parse(argv)
        connect(args.ray_address)
        # After ray.init, which sets its own SIGTERM handler (one that exits at once).
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        the_fleet = fleet(args, out, stop)
        the_fleet.run()
        the_fleet.stop()
        return 0
    except fatal as e:
        out.emit(event="error", message=str(e))
    except Exception as e:
        traceback.print_exc()
        out.emit(event="error", message="the driver failed: " + first_line(e))
    if the_fleet is not None:
        try:
            the_fleet.stop()
        except Exception:
            traceback.print_exc()
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
