"""What each audience's import loads (docs/python.md, "The package"): ComfyUI's process imports
comfy_orch.comfyui (or the comfy_env drop-in) and runs none of the worker's runtime, so it loads
none of its modules; a worker's entry loads them when it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PYTHON_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


def loaded_after(statement: str) -> list[str]:
    """The comfy_orch modules a fresh interpreter has loaded after `statement`."""
    probe = ("import json, sys\n%s\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('comfy_orch'))))"
             % statement)
    done = subprocess.run([sys.executable, "-c", probe], cwd=PYTHON_ROOT, check=True,
                          capture_output=True, text=True, timeout=60)
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("statement", ["import comfy_orch.comfyui",
                                       "from comfy_orch.comfyui import register_nodes",
                                       "import comfy_env", "import comfy_orch"])
def test_comfyui_process_loads_no_worker_module(statement: str) -> None:
    worker = [m for m in loaded_after(statement) if m.startswith("comfy_orch.worker")]
    assert worker == [], "%s loads the worker's runtime: %s" % (statement, worker)


def test_node_api_reaches_the_call_module_when_used() -> None:
    loaded = loaded_after("import comfy_orch\nassert comfy_orch.Interrupted.__name__ == "
                          "'Interrupted'")
    assert "comfy_orch.worker._call" in loaded


def test_worker_entry_loads_the_runtime_when_called() -> None:
    loaded = loaded_after("import comfy_orch.worker\nfrom comfy_orch.worker import _main")
    assert "comfy_orch.worker._runner" not in loaded  # after the handshake, as before
    assert {"comfy_orch.worker._call", "comfy_orch.worker._prompt_server",
            "comfy_orch.worker._web_server"} <= set(loaded)


@pytest.mark.parametrize("statement", ["import comfy_orch", "import comfy_orch.comfyui",
                                       "import comfy_orch.worker", "import comfy_orch.host",
                                       "import comfy_env"])
def test_no_audience_loads_the_fleet_which_runs_only_under_ray(statement: str) -> None:
    fleet = [m for m in loaded_after(statement) if m.startswith("comfy_orch.fleet")]
    assert fleet == [], "%s loads the fleet's Ray side: %s" % (statement, fleet)


def test_fleet_package_alone_imports_no_ray() -> None:
    probe = "import sys\nimport comfy_orch.fleet\nprint('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=PYTHON_ROOT, check=True,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False"]
