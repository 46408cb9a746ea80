"""Placement measured on a live fleet (docs/fleet.md, "Placement", "Measured"): three hosts that
Ray starts on a real three-node cluster, each on a sim card that holds two models (a third
evicts the least recently used), and one workload of prompts over five models of popularity 45,
25, 15, 10 and 5 (TestCheckpointLoader naming a checkpoint), drawn from a fixed seed, sent
through the gateway one at a time: first with placement, then with `placement =
"round_robin"`, each on hosts that start cold. A prompt is warm when placement's decision had
nothing for its host to load.

One prompt at a time, every host is free at each decision, so the outcome depends on no timing:
placement must run every prompt warm whose model some host holds (its first prompt of each
model is cold under any rule), and round robin, blind to what hosts hold, runs fewer warm. The
shares are printed for docs/fleet.md. Run inside a network namespace with only lo by the Ray
venv's Python (tests/fleet/CMakeLists.txt)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_gateway import gateway, loader_prompt, write_fleet  # noqa: E402
from ray_cluster import ray_cluster  # noqa: E402

RAY_BIN = Path(sys.executable).parent
MODELS = {"a.safetensors": 45, "b.safetensors": 25, "c.safetensors": 15, "d.safetensors": 10,
          "e.safetensors": 5}
PROMPTS = 60


def workload() -> list[str]:
    draw = random.Random(58)
    return draw.choices(list(MODELS), weights=list(MODELS.values()), k=PROMPTS)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ray_cluster]:
    c = ray_cluster(RAY_BIN, workers=2)
    try:
        yield c
    finally:
        c.stop()


def warm_runs(cluster: ray_cluster, directory: Path, gateway_lines: str) -> list[bool]:
    """Runs the workload through a gateway of three hosts; whether each prompt ran warm."""
    g = gateway(write_fleet(directory, cluster.address, gateway_lines=gateway_lines),
                directory / "gateway.stderr")
    try:
        g.wait_hosts_up(3)
        warm = []
        for model in workload():
            prompt_id = g.queue(loader_prompt(model))
            assert g.finished(prompt_id)["status"]["status_str"] == "success"
            warm.append(g.run_decision(prompt_id)["loads"] == [])
        return warm
    finally:
        assert g.stop() == 0


def test_placement_runs_warm_every_prompt_a_host_can_and_round_robin_fewer(
        cluster: ray_cluster, tmp_path: Path) -> None:
    placed = warm_runs(cluster, tmp_path / "placement", "")
    baseline = warm_runs(cluster, tmp_path / "round_robin", 'placement = "round_robin"\n')
    first_of_model = {model: i for i, model in reversed(list(enumerate(workload())))}
    could_be_warm = [i for i in range(PROMPTS) if i not in first_of_model.values()]
    share = sum(placed[i] for i in could_be_warm) / len(could_be_warm)
    rr_share = sum(baseline[i] for i in could_be_warm) / len(could_be_warm)
    print("warm: placement %d of %d (%.1f%%), of those that could be %.1f%%; round robin %d of "
          "%d (%.1f%%), %.1f%%" % (sum(placed), PROMPTS, 100 * sum(placed) / PROMPTS, 100 * share,
                                   sum(baseline), PROMPTS, 100 * sum(baseline) / PROMPTS,
                                   100 * rr_share))
    assert share >= 0.9, placed
    assert sum(baseline) < sum(placed), (baseline, placed)
