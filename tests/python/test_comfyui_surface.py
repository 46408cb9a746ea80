"""The members of ComfyUI's modules the integration uses (comfyui/_surface.py) and the canary
that checks a tree for them (comfyui/check.py), against fake ComfyUI modules."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from comfy_orch.comfyui import _surface, check


def fake_comfyui(monkeypatch: pytest.MonkeyPatch, without: str) -> None:
    """Every declared module, with every declared member but `without`."""
    modules: dict[str, ModuleType] = {}
    for module_name, member, _severity, _use in _surface.SURFACE:
        target = modules.setdefault(module_name, ModuleType(module_name))
        head, _, rest = member.partition(".")
        if member == without:
            continue
        if rest:
            owner = getattr(target, head, None) or type(head, (), {})
            setattr(owner, rest, None)
            setattr(target, head, owner)
        else:
            setattr(target, head, None)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_a_missing_fatal_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_comfyui(monkeypatch, without="ModelPatcher.detach")
    report = _surface.check(import_missing=False)
    assert _surface.missing(report, _surface.FATAL) == ["comfy.model_patcher.ModelPatcher.detach"]
    assert _surface.missing(report, _surface.DEGRADE) == []


def test_a_missing_degrade_member_turns_one_feature_off(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_comfyui(monkeypatch, without="PROGRESS_BAR_HOOK")
    report = _surface.check(import_missing=False)
    assert _surface.missing(report) == ["comfy.utils.PROGRESS_BAR_HOOK"]
    assert _surface.missing(report, _surface.FATAL) == []


def test_the_canary_refuses_what_is_not_a_comfyui_tree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check.main([str(tmp_path)]) == 2
    assert "is not a ComfyUI tree (it has no comfy/ directory)" in capsys.readouterr().err


def test_the_canary_says_how_to_fix_a_module_that_does_not_import() -> None:
    assert "--cpu" in check.likely_fix(RuntimeError("Torch not compiled with CUDA enabled"))
    missing = ModuleNotFoundError("No module named 'safetensors'", name="safetensors")
    assert "'safetensors'" in check.likely_fix(missing)
