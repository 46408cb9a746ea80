"""ComfyUI's memory manager and the host runtime, joined (docs/comfyui.md, "Memory"):

- the deployment's [memory] flags and the host's protocol level come from ComfyUI's own state:
  its parsed arguments (comfy.cli_args.args), and the installed comfy-aimdo version mapped to a
  level as DESIGN §4.5 says (docs/references.md);
- worker models are stand-ins in current_loaded_models (_stand_ins.py);
- soft_empty_cache also broadcasts a free to every worker (their cast buffers and caches);
- ComfyUI's own pinning (pin_memory / unpin_memory) is charged to the host's slot of the one
  pinned budget, so host and workers together never exceed it.

Nothing is patched in a ComfyUI that lacks a fatal member of the declared surface (_surface.py).
ComfyUI's modules and tensors are not type-checked here: they are Any."""

from __future__ import annotations

import functools
import logging
import sys
import threading
from types import ModuleType
from typing import Any

from ..host import Host
from . import _stand_ins, _surface

_log = logging.getLogger("comfy_orch")

_GIB = 1024 ** 3


def aimdo_level(version: object) -> int | None:
    """DESIGN §4.5: comfy-aimdo <=0.2 speaks L1, 0.3-0.4.9 L2, 0.4.10 L3, 0.4.11 and later L4."""
    parts = []
    for piece in str(version).split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit()) if piece else ""
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        return None
    v = tuple(parts + [0] * (3 - len(parts)))
    if v < (0, 3, 0):
        return 1
    if v < (0, 4, 10):
        return 2
    if v < (0, 4, 11):
        return 3
    return 4


def _installed_aimdo_version() -> str | None:
    try:
        from importlib import metadata
        return metadata.version("comfy-aimdo")
    except Exception:  # not installed (or unreadable metadata): ComfyUI runs without it
        return None


def deployment_settings(args: Any = None, aimdo_version: str | None = None
                        ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(host settings, [memory] settings, why) for the host of this ComfyUI process: its flags
    as ComfyUI parsed them, and its aimdo's protocol level."""
    if args is None:
        args = getattr(sys.modules.get("comfy.cli_args"), "args", None)
    if aimdo_version is None:
        aimdo_version = _installed_aimdo_version()
    host: dict[str, Any] = {}
    memory: dict[str, Any] = {}
    why: list[str] = []
    level = aimdo_level(aimdo_version) if aimdo_version else None
    if level is not None:
        host["protocol_level"] = level
        why.append("comfy-aimdo %s speaks level %d" % (aimdo_version, level))
    else:
        why.append("no comfy-aimdo installed: workers use their pager's own level")
    if args is None:
        why.append("comfy.cli_args not loaded: ComfyUI's default memory flags")
        return host, memory, why
    for flag in ("highvram", "gpu_only", "novram", "cpu", "disable_pinned_memory",
                 "disable_dynamic_vram", "enable_dynamic_vram"):
        if getattr(args, flag, False) is True:
            memory[flag] = True
    if level is None and not getattr(args, "enable_dynamic_vram", False):
        memory["disable_dynamic_vram"] = True  # no aimdo: ComfyUI itself runs the ledger
    for flag, key in (("reserve_vram", "reserve_vram"), ("vram_headroom", "vram_headroom")):
        gib = getattr(args, flag, None)
        if isinstance(gib, (int, float)) and not isinstance(gib, bool) and gib >= 0:
            memory[key] = int(gib * _GIB)
    streams = getattr(args, "async_offload", None)
    if isinstance(streams, int) and not isinstance(streams, bool) and 0 <= streams <= 16:
        memory["async_offload_streams"] = streams
    elif getattr(args, "disable_async_offload", False) is True:
        memory["async_offload_streams"] = 0
    why.append("memory flags from comfy.cli_args")
    return host, memory, why


def integrate(host: Host) -> _stand_ins.StandIns | None:
    """Joins ComfyUI's memory manager to `host`: returns the StandIns to sync after each node,
    or None when this ComfyUI lacks a member the integration needs (logged, named). The patches
    go in once per process and reach whichever host is current (a restarted one too)."""
    global _current
    report = _surface.check(import_missing=False)
    fatal = _surface.missing(report, _surface.FATAL)
    if fatal:
        _log.error("[comfy-orch] ComfyUI's memory manager lacks %s: worker models stay out of "
                   "its current_loaded_models and nothing of it is patched. Check with `python -m"
                   " comfy_orch.comfyui.check <ComfyUI root>`.", ", ".join(fatal))
        return None
    for name in _surface.missing(report, _surface.DEGRADE):
        _log.warning("[comfy-orch] ComfyUI lacks %s: that feature is off", name)
    mm = sys.modules["comfy.model_management"]
    _current = host
    stand_ins = _stand_ins.StandIns(host, mm, mm.get_torch_device())
    _broadcast_soft_empty_cache(mm)
    if hasattr(mm, "pin_memory") and hasattr(mm, "unpin_memory"):
        _charge_pinning(mm)
    return stand_ins


def detach() -> None:
    """The host stopped: the patches pass straight through to ComfyUI's own functions."""
    global _current
    _current = None
    with _charged_lock:
        _charged.clear()  # its slot of the budget went with it


_current: Host | None = None  # the host the patches reach, None when none runs
_charged: dict[int, int] = {}  # data_ptr -> bytes this process's pinning holds of the host's slot
_charged_lock = threading.Lock()


def _broadcast_soft_empty_cache(mm: Any) -> None:
    original = mm.soft_empty_cache
    if getattr(original, "_comfy_orch", False):
        return

    @functools.wraps(original)
    def soft_empty_cache(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        host = _current
        if host is not None:
            try:
                receipts = host.free(unload_models=False, free_memory=True)
                _log.debug("[comfy-orch] soft_empty_cache: workers' receipts %s", receipts)
            except Exception as e:  # never raise where ComfyUI only tidies up
                _log.debug("[comfy-orch] soft_empty_cache not broadcast: %s", e)
        return result

    soft_empty_cache._comfy_orch = True  # type: ignore[attr-defined]  # the mark that it is ours
    mm.soft_empty_cache = soft_empty_cache


def _tensor_bytes(tensor: Any) -> int:
    """The bytes ComfyUI's pin_memory registers: tensor.nbytes, or numel() * element_size() on a
    torch without Tensor.nbytes (Debian's 1.13)."""
    try:
        if hasattr(tensor, "nbytes"):
            return max(0, int(tensor.nbytes))
        return max(0, int(tensor.numel()) * int(tensor.element_size()))
    except Exception:  # not a tensor: ComfyUI refuses it itself, and nothing is charged
        return 0


def _pointer(tensor: Any) -> int | None:
    try:
        return int(tensor.data_ptr())
    except Exception:
        return None


def _release(host: Host, size: int) -> None:
    try:
        host.pinned_release(size)
    except Exception:  # a stopped host holds no budget any more
        pass


def _charge_pinning(mm: Any) -> None:
    """Each pin reserves its bytes first and is recorded by address; an unpin returns exactly
    what its pin recorded, so a tensor pinned before comfy-orch started (or by another host)
    returns nothing that others reserved."""
    original_pin, original_unpin = mm.pin_memory, mm.unpin_memory
    if getattr(original_pin, "_comfy_orch", False):
        return

    @functools.wraps(original_pin)
    def pin_memory(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        host, size, ptr = _current, _tensor_bytes(tensor), _pointer(tensor)
        if host is None or size == 0 or ptr is None:
            return original_pin(tensor, *args, **kwargs)
        try:
            reserved = host.pinned_reserve(size)
        except Exception:  # a stopped host charges nothing
            return original_pin(tensor, *args, **kwargs)
        if not reserved:
            return False  # beyond the one budget: ComfyUI keeps the tensor pageable
        pinned = False
        try:
            pinned = original_pin(tensor, *args, **kwargs)
        finally:
            with _charged_lock:
                if pinned and ptr not in _charged:
                    _charged[ptr] = size
                    size = 0
            if size:
                _release(host, size)  # not pinned (or already charged): nothing held
        return pinned

    @functools.wraps(original_unpin)
    def unpin_memory(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        unpinned = original_unpin(tensor, *args, **kwargs)
        if unpinned:
            ptr = _pointer(tensor)
            with _charged_lock:
                size = _charged.pop(ptr, 0) if ptr is not None else 0
            host = _current
            if size and host is not None:
                _release(host, size)
        return unpinned

    pin_memory._comfy_orch = True  # type: ignore[attr-defined]  # the mark that it is ours
    mm.pin_memory, mm.unpin_memory = pin_memory, unpin_memory
