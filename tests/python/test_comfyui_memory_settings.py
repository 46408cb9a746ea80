"""The host's memory settings from ComfyUI's own state (comfyui/_memory.py): its parsed
arguments, and comfy-aimdo's version as a protocol level (DESIGN §4.5)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from comfy_orch.comfyui._memory import aimdo_level, deployment_settings


@pytest.mark.parametrize("version, level", [
    ("0.2.9", 1), ("0.3.0", 2), ("0.4.9", 2), ("0.4.10", 3), ("0.4.11", 4), ("1.0", 4),
    ("0.4.10.post1", 3), ("", None), ("dev", None)])
def test_aimdo_versions_map_to_protocol_levels(version: str, level: int | None) -> None:
    assert aimdo_level(version) == level


def test_comfyuis_flags_become_the_memory_section() -> None:
    args = SimpleNamespace(highvram=True, cpu=False, reserve_vram=0.5, vram_headroom=None,
                           async_offload=2, disable_async_offload=False)
    host, memory, why = deployment_settings(args, "0.4.11")
    assert host == {"protocol_level": 4}
    assert memory == {"highvram": True, "reserve_vram": 1 << 29, "async_offload_streams": 2}
    assert why == ["comfy-aimdo 0.4.11 speaks level 4", "memory flags from comfy.cli_args"]


def test_without_aimdo_comfyui_runs_the_ledger_itself() -> None:
    args = SimpleNamespace(disable_async_offload=True)
    host, memory, why = deployment_settings(args, None)
    assert host == {}
    assert memory == {"disable_dynamic_vram": True, "async_offload_streams": 0}
    assert why[0] == "no comfy-aimdo installed: workers use their pager's own level"
