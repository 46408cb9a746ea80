"""The node call in progress and what node code may do during it (docs/python.md). Nodes run
one at a time on the worker's main thread, so one current call is all there is."""

from __future__ import annotations

import ctypes
import json
import threading

from .._shared import abi
from . import _dynprompt

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    import numpy.typing as npt

    from .._shared.tensors import NodeTensor


class Interrupted(Exception):
    """Raised by check_interrupted() once the prompt was interrupted; ends the node as ComfyUI's
    InterruptProcessingException does."""


class Call:
    def __init__(self, ctx: ctypes._Pointer[abi.NodeContext], node_id: str) -> None:
        self.ctx = ctx
        self.api: abi.NodeApi = ctx.contents.api.contents
        self.node_id = node_id
        # Whether node code gets torch tensors (the worker decides it at its first call):
        # a numpy array it returns is then no tensor of its world but a value of its own.
        self.torch_tensors = False
        self.allocated: list[abi.Tensor] = []  # orch_tensor structs this call allocated (empty())
        self.inputs: list[abi.Tensor] = []     # orch_tensor structs of its tensor inputs
        # id(object) -> (object, orch_tensor) for every array or torch tensor this call handed
        # to node code over pool bytes: returning one of them as it is needs no comparison.
        self.pool_objects: dict[int, tuple[NodeTensor, abi.Tensor]] = {}
        # What outputs point to (strings, ctypes arrays): kept until the worker has copied them.
        self.keep: list[object] = []

    def status(self, what: str, status: int) -> None:
        if status == abi.STATUS_OOM_RETRYABLE:
            raise MemoryError("%s: out of memory (retry after freeing)" % what)
        if status != abi.STATUS_OK:
            raise RuntimeError("%s failed with orch_status %d" % (what, status))

    def hidden(self, kind: str) -> Any:
        """ComfyUI's hidden value `kind` for this call: the node's id for UNIQUE_ID, what the
        host sent for PROMPT and EXTRA_PNGINFO (JSON, hence Any), DYNPROMPT built from PROMPT,
        else None."""
        if kind == "UNIQUE_ID":
            return self.node_id
        if kind == "DYNPROMPT":
            return _dynprompt.dynamic_prompt(self.hidden("PROMPT"))
        if not abi.api_has(self.api, "hidden"):
            return None
        text = self.api.hidden(self.ctx, kind.encode())
        return json.loads(text.decode("utf-8", "replace")) if text else None

    def new_tensor(self, shape: Iterable[int], dtype: npt.DTypeLike) -> abi.Tensor:
        sizes = tuple(int(n) for n in shape)
        if len(sizes) > abi.TENSOR_MAX_DIMS:
            raise ValueError("a tensor has at most %d dimensions" % abi.TENSOR_MAX_DIMS)
        dims = (ctypes.c_int64 * max(len(sizes), 1))(*sizes)
        from .._shared import tensors
        out = abi.Tensor()
        self.status("output tensor %s" % (sizes,),
                    self.api.output_tensor(self.ctx, tensors.dtype_code(dtype), len(sizes),
                                           dims, ctypes.byref(out)))
        self.allocated.append(out)
        return out

    def handed_out(self, obj: NodeTensor, t: abi.Tensor) -> NodeTensor:
        """Records that node code got `obj` over tensor `t`'s pool bytes; returns obj."""
        self.pool_objects[id(obj)] = (obj, t)
        return obj

    def pool_tensor_of(self, obj: object) -> abi.Tensor | None:
        """The orch_tensor `obj` was handed out over, when node code returns it as it is (not
        reshaped or restrided in place since), else None."""
        entry = self.pool_objects.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        from .._shared import tensors
        return entry[1] if tensors.still_over(obj, entry[1]) else None


def qualified_name(exc_type: type[BaseException]) -> str:
    """An exception type as ComfyUI's exception_type names it."""
    module = exc_type.__module__
    return exc_type.__qualname__ if module == "builtins" else module + "." + exc_type.__qualname__


current: Call | None = None  # the Call in progress, or None between calls
# Held to end a call, and by any other thread that uses the current call's context: the worker
# frees the context when execute returns.
lock = threading.Lock()


def require(what: str) -> Call:
    if current is None:
        raise RuntimeError("comfy_orch.%s is only available inside a node's call" % what)
    return current
