"""comfy_orch: Python packs as comfy-orch workers (docs/python.md).

A pack's node code runs unchanged; during a call it may also use the worker's memory through
this module: pool-backed tensors, models the host can see and evict, cast buffers, the pinned
budget, progress and interrupts. Pure Python over ctypes, so one copy serves every env.

This module is the node author's API. The rest of the package, by audience (docs/python.md,
"The package"): comfy_orch.worker runs a pack in its worker, comfy_orch.comfyui is comfy-orch
inside ComfyUI's process, comfy_orch.host binds liborch_host.so, and comfy_orch._shared is what
more than one of them uses."""

from __future__ import annotations

import ctypes

# Nothing of the worker's runtime is imported here: ComfyUI's process imports this package for
# comfy_orch.comfyui and uses none of it (tests/python/test_imports.py). Node code runs in a worker,
# where worker._call is loaded already; numpy (through _shared.tensors) waits for a tensor.

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    import numpy.typing as npt

    from .worker import _call
    from .worker._call import Interrupted

__all__ = ["Interrupted", "cast_buffer", "check_interrupted", "device", "empty", "interrupted",
           "node_id", "pinned_release", "pinned_reserve", "progress", "register_model"]


def __getattr__(name: str) -> Any:
    """`Interrupted`, from the worker's call module at first use (PEP 562)."""
    if name == "Interrupted":
        from .worker._call import Interrupted
        return Interrupted
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _require(what: str) -> _call.Call:
    """The running call (a node's API used outside one raises, naming `what`)."""
    from .worker import _call
    return _call.require(what)


def device() -> Any:
    """The torch device this worker's node code computes on: its GPU, or the CPU for the cpu and
    sim devices (a torch.device: torch is not type-checked here)."""
    from .worker._torch_models import device as worker_device
    return worker_device()


def progress(value: float, max_value: float) -> None:
    """ComfyUI's progress event for the running node."""
    call = _require("progress")
    call.api.progress(call.ctx, int(value), int(max_value))


def interrupted() -> bool:
    """True once the prompt was interrupted: the node should stop (or check_interrupted())."""
    call = _require("interrupted")
    return call.api.interrupted(call.ctx) != 0


def check_interrupted() -> None:
    """Raises Interrupted once the prompt was interrupted."""
    if interrupted():
        from .worker._call import Interrupted
        raise Interrupted("the prompt was interrupted")


def node_id() -> str:
    """The prompt's id of the running node."""
    return _require("node_id").node_id


def empty(shape: Iterable[int], dtype: npt.DTypeLike = "float32") -> Any:
    """A tensor in the pinned pool that the node can fill and return without a copy: a torch
    tensor when the pack uses torch, else a numpy array."""
    call = _require("empty")
    import numpy as np
    t = call.new_tensor(shape, np.dtype(dtype))
    from ._shared import tensor_kind, tensors
    return call.handed_out(tensors.to_node(t, tensor_kind.use_torch()), t)


class Model:
    """A model's weights as the worker's memory manager holds them: the host sees it as a
    stand-in and can evict it (docs/memory-semantics.md)."""

    def __init__(self, call: _call.Call, name: str, handle: ctypes.c_void_p,
                 created: bool) -> None:
        self.name = name
        self.created = created
        self._handle = handle

    def fault(self, offset: int, size: int) -> None:
        """Maps and pins [offset, offset+size) (a layer); MemoryError: stream it instead."""
        call = _require("Model.fault")
        call.status("fault %s" % self.name,
                    call.api.region_fault(call.ctx, self._handle, int(offset), int(size)))

    def unpin(self, offset: int, size: int) -> None:
        call = _require("Model.unpin")
        call.status("unpin %s" % self.name,
                    call.api.region_unpin(call.ctx, self._handle, int(offset), int(size)))


def register_model(name: str, nbytes: int) -> Model:
    """Registers a model of `nbytes` under `name` (created on first use, kept for the worker's
    life), so the host's ledger shows it and its evictions reach it."""
    call = _require("register_model")
    handle = ctypes.c_void_p()
    created = ctypes.c_int32()
    call.status("register_model %s" % name,
                call.api.region(call.ctx, str(name).encode("utf-8"), int(nbytes),
                                ctypes.byref(handle), ctypes.byref(created)))
    return Model(call, name, handle, bool(created.value))


def cast_buffer(stream: int, size: int) -> int:
    """The address of a cast buffer of at least `size` bytes for offload stream `stream`."""
    call = _require("cast_buffer")
    address = ctypes.c_uint64()
    call.status("cast_buffer", call.api.cast_buffer(call.ctx, int(stream), int(size),
                                                    ctypes.byref(address)))
    return address.value


def pinned_reserve(nbytes: int) -> None:
    """Reserves pinned host memory from this worker's slot of the one budget."""
    call = _require("pinned_reserve")
    call.status("pinned_reserve", call.api.pinned_reserve(call.ctx, int(nbytes)))


def pinned_release(nbytes: int) -> None:
    """Returns what pinned_reserve reserved."""
    call = _require("pinned_release")
    call.api.pinned_release(call.ctx, int(nbytes))
