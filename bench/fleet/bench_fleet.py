"""The fleet benchmark (docs/fleet.md, "Measured"), on a real Ray cluster of three nodes on this
machine, through `comfy-orch gateway` (scripts/bench-fleet runs it in a network namespace of its
own, as the fleet tests run):

- scale: the same sleep-bound prompts (TestSleep) queued at once through a gateway of one host,
  then of three; the time each queue takes to drain, each as a ratio to its floor (the prompts'
  sleep divided among the hosts, from the same run), and the speedup of three over one;
- placement under load: bursts of prompts over five models (TestCheckpointLoader, then a
  TestSleep as a sampler's run), from a fixed seed, through placement and through round robin,
  on hosts that each hold two models: the share run warm, the mean wait at the gateway and the
  drain time.

Counts that load cannot move are printed beside the times: prompts per host and loads.
Usage: bench_fleet.py [--prompts N] [--sleep-ms MS] [--bursts N] [--json]"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "fleet"))
from fleet_gateway import gateway, loader_prompt, sleep_prompt, write_fleet  # noqa: E402
from ray_cluster import ray_cluster  # noqa: E402

MODELS = {"a.safetensors": 45, "b.safetensors": 25, "c.safetensors": 15, "d.safetensors": 10,
          "e.safetensors": 5}


def started(cluster: ray_cluster, directory: Path, hosts: int, lines: str = "") -> gateway:
    g = gateway(write_fleet(directory, cluster.address, hosts=hosts, gateway_lines=lines),
                directory / "gateway.stderr")
    g.wait_hosts_up(hosts)
    return g


class decisions:
    """Every run decision the gateway makes while it is open (/orch/fleet keeps the newest 100),
    read every 50 ms on a thread of its own."""

    def __init__(self, g: gateway) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self._g = g
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.wait(0.05):
            self.take()

    def take(self) -> None:
        for d in self._g.fleet()["decisions"]:
            if d["decision"] == "run":
                self.runs[d["prompt_id"]] = d

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.take()


def drain(g: gateway, prompts: list[dict[str, Any]]) -> tuple[float, list[str]]:
    """Queues every prompt at once; seconds until the last has ended, and the ids."""
    begin = time.monotonic()
    ids = [g.queue(p) for p in prompts]
    for prompt_id in ids:
        assert g.finished(prompt_id)["status"]["status_str"] == "success", prompt_id
    return time.monotonic() - begin, ids


def scale(cluster: ray_cluster, scratch: Path, prompts: int, sleep_ms: int) -> dict[str, Any]:
    result: dict[str, Any] = {"prompts": prompts, "sleep_ms": sleep_ms}
    for hosts in (1, 3):
        g = started(cluster, scratch / ("scale-%d" % hosts), hosts)
        try:
            # Each host's first prompt; then prompts that differ by a millisecond each, as a
            # prompt the host has run before is answered from its cache.
            drain(g, [sleep_prompt(sleep_ms - 1 - i) for i in range(hosts)])
            seconds, ids = drain(g, [sleep_prompt(sleep_ms + i) for i in range(prompts)])
            per_host = Counter(g.run_decision(i)["host"] for i in ids)
        finally:
            g.stop()
        floor = sum(sleep_ms + i for i in range(prompts)) / 1000.0 / hosts
        result["hosts_%d" % hosts] = {"seconds": round(seconds, 3), "floor_seconds": floor,
                                      "ratio_to_floor": round(seconds / floor, 3),
                                      "prompts_per_host": dict(sorted(per_host.items()))}
    result["speedup_3_over_1"] = round(result["hosts_1"]["seconds"] / result["hosts_3"]["seconds"],
                                       3)
    return result


def bursts(seed: int, count: int) -> list[tuple[float, str]]:
    """(seconds after the start, model) for bursts of 2 to 6 prompts, 0.3 to 0.9 s apart."""
    draw = random.Random(seed)
    at, schedule = 0.0, []
    for _ in range(count):
        for _ in range(draw.randint(2, 6)):
            schedule.append((at, draw.choices(list(MODELS), weights=list(MODELS.values()))[0]))
        at += draw.uniform(0.3, 0.9)
    return schedule


def placement_under_load(cluster: ray_cluster, scratch: Path, burst_count: int,
                         run_ms: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    schedule = bursts(58, burst_count)
    for name, lines in (("placement", ""), ("round_robin", 'placement = "round_robin"\n')):
        g = started(cluster, scratch / name, 3, lines)
        try:
            seen = decisions(g)
            begin = time.monotonic()
            ids, queued_at = [], {}
            for at, model in schedule:
                time.sleep(max(0.0, begin + at - time.monotonic()))
                # Its own run time, a millisecond apart: no host answers it from its cache.
                ids.append(g.queue(loader_prompt(model, run_ms + len(ids))))
                queued_at[ids[-1]] = time.time()
            waits, warm, loads = [], 0, 0
            for prompt_id in ids:
                entry = g.finished(prompt_id)
                assert entry["status"]["status_str"] == "success", prompt_id
                messages = dict(entry["status"]["messages"])
                # The host's clock is this machine's: its start, less when the gateway took it.
                waits.append(messages["execution_start"]["timestamp"] / 1000.0 -
                             queued_at[prompt_id])
            seconds = time.monotonic() - begin
            seen.close()
            for prompt_id in ids:
                d = seen.runs[prompt_id]
                warm += d["loads"] == []
                loads += len(d["loads"])
        finally:
            g.stop()
        result[name] = {"prompts": len(ids), "warm": warm,
                        "warm_share": round(warm / len(ids), 3), "loads": loads,
                        "mean_wait_s": round(sum(waits) / len(waits), 3),
                        "drain_seconds": round(seconds, 3)}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=30, help="sleep-bound prompts (scale)")
    parser.add_argument("--sleep-ms", type=int, default=500, help="each one's sleep (scale)")
    parser.add_argument("--bursts", type=int, default=25, help="bursts (placement under load)")
    parser.add_argument("--run-ms", type=int, default=150, help="each loader prompt's run")
    parser.add_argument("--json", action="store_true", help="one JSON document, nothing else")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-fleet-", dir="/tmp"))
    cluster = ray_cluster(Path(sys.executable).parent, workers=2)
    try:
        report = {"scale": scale(cluster, scratch, args.prompts, args.sleep_ms),
                  "placement_under_load": placement_under_load(cluster, scratch, args.bursts,
                                                               args.run_ms)}
    finally:
        cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["scale"]
    print("scale: %d prompts of %d ms" % (s["prompts"], s["sleep_ms"]))
    for hosts in (1, 3):
        h = s["hosts_%d" % hosts]
        print("  %d host(s): %.2f s, %.3f x its floor of %.2f s; prompts per host %s" % (
            hosts, h["seconds"], h["ratio_to_floor"], h["floor_seconds"], h["prompts_per_host"]))
    print("  three hosts drain the queue %.2f x faster than one" % s["speedup_3_over_1"])
    print("placement under load:")
    for name, r in report["placement_under_load"].items():
        print("  %-11s %d of %d warm (%.1f%%), %d loads, mean wait %.2f s, drained in %.2f s" % (
            name, r["warm"], r["prompts"], 100 * r["warm_share"], r["loads"], r["mean_wait_s"],
            r["drain_seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
