"""The worker library's side of the node API (orch_node_api), in Python: what liborch_worker.so
gives a node call, so the package's call path runs in-process with no build. Output tensors are
numpy buffers kept here; everything a call reports (progress, failures, ui) is recorded."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from comfy_orch._shared import abi

if TYPE_CHECKING:
    Context = ctypes._Pointer[abi.NodeContext]
_DTYPES = {abi.DTYPE_F32: np.float32, abi.DTYPE_U8: np.uint8, abi.DTYPE_I64: np.int64}


class FakeWorker:
    def __init__(self, node: str = "7") -> None:
        self.buffers: list[npt.NDArray[Any]] = []  # what output tensors point into
        self.progress: list[tuple[int, int]] = []
        self.failures: list[tuple[str, str]] = []
        self.traceback: list[str] = []
        self.ui: list[str] = []
        self.expand: list[str] = []
        self.logs: list[tuple[int, str]] = []
        self.interrupt = False
        self.hidden: dict[str, str] = {}  # kind -> the JSON the host would send
        self.regions: dict[str, int] = {}
        self._text: list[ctypes.Array[ctypes.c_char]] = []  # strings returned to C stay alive
        self._node = ctypes.create_string_buffer(node.encode())
        self._functions: list[object] = []
        self.api = abi.NodeApi()
        self.api.struct_size = ctypes.sizeof(abi.NodeApi)
        types = {field[0]: field[1] for field in abi.NodeApi._fields_}
        entries: dict[str, Callable[..., Any]] = {
            "output_tensor": self._output_tensor, "region": self._region,
            "region_fault": lambda ctx, handle, offset, size: abi.STATUS_OK,
            "region_unpin": lambda ctx, handle, offset, size: abi.STATUS_OK,
            "cast_buffer": self._cast_buffer,
            "pinned_reserve": lambda ctx, n: abi.STATUS_OK,
            "pinned_release": lambda ctx, n: None,
            "progress": lambda ctx, value, total: self.progress.append((value, total)),
            "interrupted": lambda ctx: int(self.interrupt),
            "log": lambda ctx, level, text: self.logs.append((level, text.decode())),
            "fail": lambda ctx, kind, text: self.failures.append((kind.decode(), text.decode())),
            "node_id": lambda ctx: ctypes.addressof(self._node),
            "streams": lambda ctx: 1,
            "fail_traceback": self._fail_traceback, "hidden": self._hidden,
            "ui": lambda ctx, text: self._record(self.ui, text),
            "expand": lambda ctx, text: self._record(self.expand, text),
        }
        for name, fn in entries.items():
            pointer = types[name](fn)
            self._functions.append(pointer)
            setattr(self.api, name, pointer)
        self.context = abi.NodeContext(ctypes.pointer(self.api), None)
        self.ctx: Context = ctypes.pointer(self.context)

    # A c_char_p result is returned by address: ctypes keeps nothing alive for a callback.
    def _returned_text(self, text: str) -> int:
        buffer = ctypes.create_string_buffer(text.encode())
        self._text.append(buffer)
        return ctypes.addressof(buffer)

    def _record(self, into: list[str], text: bytes) -> int:
        into.append(text.decode())
        return 0

    def _output_tensor(self, ctx: Context, dtype: int, ndim: int, dims: Any, out: Any) -> int:
        shape = tuple(dims[i] for i in range(ndim))
        array = np.zeros(shape, _DTYPES[dtype])
        self.buffers.append(array)
        t = out.contents
        t.dtype, t.ndim, t.data = dtype, ndim, array.ctypes.data
        for i, n in enumerate(shape):
            t.shape[i] = n
        return abi.STATUS_OK

    def _region(self, ctx: Context, name: bytes, size: int, handle: Any, created: Any) -> int:
        created.contents.value = int(name.decode() not in self.regions)
        self.regions[name.decode()] = size
        handle.contents.value = len(self.regions)
        return abi.STATUS_OK

    def _cast_buffer(self, ctx: Context, stream: int, size: int, address: Any) -> int:
        address.contents.value = 4096 * (stream + 1)
        return abi.STATUS_OK

    def _fail_traceback(self, ctx: Context, lines: Any, count: int) -> None:
        self.traceback = [lines[i].decode() for i in range(count)]

    def _hidden(self, ctx: Context, kind: bytes) -> int | None:
        text = self.hidden.get(kind.decode())
        return self._returned_text(text) if text is not None else None


def values(*items: tuple[int, Any]) -> ctypes.Array[abi.Value]:
    """orch_values as the worker passes a call's inputs: (kind, value) each."""
    out = (abi.Value * max(len(items), 1))()
    keep: list[bytes] = []
    for v, (kind, value) in zip(out, items):
        v.kind = kind
        if kind in (abi.VALUE_INT, abi.VALUE_BOOL):
            v.i = int(value)
        elif kind == abi.VALUE_FLOAT:
            v.f = float(value)
        elif kind == abi.VALUE_STRING:
            keep.append(str(value).encode())
            v.s = keep[-1]
    values_keep.append(keep)
    return out


values_keep: list[object] = []  # what the inputs made by values() point to
