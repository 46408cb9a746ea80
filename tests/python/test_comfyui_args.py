"""ComfyUI's arguments from its process to its workers (_shared/comfyui_args.py): written as
JSON by export(), set on a worker's comfy.cli_args.args once that module runs."""

from __future__ import annotations

import enum
import json
import os
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from comfy_orch._shared import comfyui_args


class LatentPreviewMethod(enum.Enum):
    NoPreviews = "none"
    Auto = "auto"


class PerformanceFeature(enum.Enum):
    Fp16Accumulation = "fp16_accumulation"
    CublasOps = "cublas_ops"


def parsed(**values: Any) -> SimpleNamespace:
    defaults: dict[str, Any] = {"cpu": False, "lowvram": False, "reserve_vram": None,
                "preview_method": LatentPreviewMethod.NoPreviews, "fast": set(), "verbose": "INFO"}
    return SimpleNamespace(**dict(defaults, **values))


def test_export_writes_the_mirrored_arguments_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, so that the test's end puts back what was there before export wrote them.
    monkeypatch.setenv("COMFY_CPU", "")
    monkeypatch.setenv(comfyui_args.VARIABLE, "")
    args = parsed(cpu=True, reserve_vram=1.5, preview_method=LatentPreviewMethod.Auto,
                  fast={PerformanceFeature.CublasOps, PerformanceFeature.Fp16Accumulation})
    args.listen = "0.0.0.0"  # not one the workers need
    values = comfyui_args.export(args)
    assert json.loads(os.environ[comfyui_args.VARIABLE]) == values
    assert values == {"cpu": True, "lowvram": False, "reserve_vram": 1.5,
                      "preview_method": "auto", "fast": ["cublas_ops", "fp16_accumulation"],
                      "verbose": "INFO"}
    assert os.environ["COMFY_CPU"] == "1"


def test_a_worker_on_the_cpu_or_sim_device_always_runs_with_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(comfyui_args.VARIABLE, json.dumps({"lowvram": True, "listen": "x"}))
    monkeypatch.delenv("COMFY_CPU", raising=False)
    monkeypatch.setenv("ORCH_DEVICE", "cuda:1")
    assert comfyui_args.wanted() == {"lowvram": True}
    monkeypatch.setenv("ORCH_DEVICE", "sim")
    assert comfyui_args.wanted() == {"lowvram": True, "cpu": True}
    monkeypatch.setenv(comfyui_args.VARIABLE, "not json")
    assert comfyui_args.wanted() == {"cpu": True}


def test_apply_restores_enums_and_the_fast_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_DEVICE", "cuda:0")
    monkeypatch.delenv("COMFY_CPU", raising=False)
    monkeypatch.setenv(comfyui_args.VARIABLE, json.dumps(
        {"preview_method": "auto", "fast": ["cublas_ops"], "reserve_vram": 2}))
    cli_args = ModuleType("comfy.cli_args")
    args = parsed()
    setattr(cli_args, "args", args)
    setattr(cli_args, "PerformanceFeature", PerformanceFeature)
    comfyui_args.apply(cli_args)
    assert args.preview_method is LatentPreviewMethod.Auto
    assert args.fast == {PerformanceFeature.CublasOps}
    assert args.reserve_vram == 2 and args.cpu is False
