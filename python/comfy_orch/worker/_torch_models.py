"""torch modules moved to the worker's device become models the host can see (docs/python.md,
docs/memory-semantics.md "Worker models"), as comfy-env registers them (docs/references.md,
comfy-env §1.9 item 8): torch.nn.Module.to and .cuda are wrapped, and what a node call moved to
the worker's device is recorded when the call ends, once per outermost module:

- a module inside one moved in the same call, or inside one already recorded, is never counted
  on its own (ComfyUI's ModelPatcher.load moves each weight-holding submodule, then the whole
  model: one record of the model's size);
- a module moved after its submodules were recorded by an earlier call is recorded with only the
  bytes those records do not already hold, so nothing is counted twice;
- each record is "<ClassName>_<n>" with the bytes of its parameters and buffers, resident in the
  worker's memory manager (faulted, then unpinned: evictable) since the module is on the device.

The worker's device is a GPU (cuda, hip), or the CPU for the cpu and sim devices, where torch
computes on the CPU. The wrappers go in as soon as torch is imported, by the pack at its top or
inside a node's call.

torch is not type-checked (docs/python.md, "Checks"): its modules and devices are Any here."""

from __future__ import annotations

import weakref

from .._shared import import_hooks
from . import _call

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

_records: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # module -> bytes
_moved: list[Any] = []  # torch modules moved to the worker's device during the current call
_count = 0


def worker_device_kind() -> str:
    import os
    return os.environ.get("ORCH_DEVICE", "cpu").split(":")[0]


def device() -> Any:
    """The torch device node code should put its tensors on: this worker's GPU, or the CPU for
    the cpu and sim devices."""
    import os

    import torch
    spec = os.environ.get("ORCH_DEVICE", "cpu")
    kind, _, index = spec.partition(":")
    if kind in ("cuda", "hip"):  # ROCm builds of torch name HIP devices "cuda" too
        return torch.device("cuda", int(index or 0))
    return torch.device("cpu")


def install() -> None:
    """The wrappers, now if torch is imported, else when it is."""
    import_hooks.after_import("torch", _wrap)


def _wrap(torch: ModuleType) -> None:
    if getattr(torch.nn.Module.to, "_comfy_orch", False):
        return
    original_to = torch.nn.Module.to
    original_cuda = torch.nn.Module.cuda

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original_to(self, *args, **kwargs)
        target = torch._C._nn._parse_to(*args, **kwargs)[0]
        if target is not None:
            _note(self, torch.device(target))
        return result

    def cuda(self: Any, device_index: int | None = None) -> Any:
        result = original_cuda(self, device_index)
        _note(self, torch.device("cuda", device_index if device_index is not None else
                                 torch.cuda.current_device()))
        return result

    to._comfy_orch = True  # type: ignore[attr-defined]  # the mark that it is ours
    torch.nn.Module.to = to
    torch.nn.Module.cuda = cuda


def _on_worker_device(target: Any) -> bool:
    if worker_device_kind() in ("cuda", "hip"):
        return bool(target.type == "cuda")
    return bool(target.type == "cpu")


def _note(module: Any, target: Any) -> None:
    if _call.current is not None and _on_worker_device(target):
        _moved.append(module)


def _nbytes(module: Any) -> int:
    return int(sum(t.numel() * t.element_size()
                   for t in list(module.parameters()) + list(module.buffers())))


def end_call() -> None:
    """Records what the call moved, once per outermost module (the module docstring)."""
    global _count
    if not _moved:
        return
    moved = list({id(m): m for m in _moved}.values())
    _moved.clear()
    recorded = list(_records.keys())
    inside: set[int] = set()  # ids of modules below a moved or recorded one
    for module in moved + recorded:
        inside.update(id(m) for m in module.modules() if m is not module)
    import comfy_orch
    for module in moved:
        if id(module) in inside or module in _records:
            continue
        below = {id(m) for m in module.modules()}
        nbytes = _nbytes(module) - sum(n for m, n in _records.items() if id(m) in below)
        if nbytes <= 0:
            continue
        _count += 1
        model = comfy_orch.register_model("%s_%d" % (type(module).__name__, _count), nbytes)
        _records[module] = nbytes
        # On the device already: resident in the worker's memory manager, and evictable.
        model.fault(0, nbytes)
        model.unpin(0, nbytes)
