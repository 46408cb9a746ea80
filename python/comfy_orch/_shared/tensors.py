"""Tensors between the pinned pool and node code (docs/python.md). An input is a view of the
producer's pool buffer, never a copy; an output is written into the pool once, or not at all when
it already lives there (comfy_orch.empty(), or an input passed through unchanged).

Node code gets torch tensors when its pack imported torch, numpy arrays otherwise
(tensor_kind.use_torch): a numpy pack does not pay torch's import. This module imports numpy, so
the worker imports it at the first tensor, never at its start.

Shared by the worker runtime (its values) and the host bindings (the host's views)."""

from __future__ import annotations

import sys

import numpy as np

from . import abi

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TypeAlias

    import numpy.typing as npt

    # A numpy array, or a torch tensor: torch is not type-checked here, so Any stands for both.
    NodeTensor: TypeAlias = Any
    Array: TypeAlias = npt.NDArray[Any]

_DTYPES: dict[int, np.dtype[Any]] = {abi.DTYPE_F32: np.dtype(np.float32),
                                     abi.DTYPE_U8: np.dtype(np.uint8),
                                     abi.DTYPE_I64: np.dtype(np.int64)}
_CODES = {v: k for k, v in _DTYPES.items()}


def dtype_code(dtype: npt.DTypeLike) -> int:
    code = _CODES.get(np.dtype(dtype))
    if code is None:
        raise TypeError("a tensor of dtype %s cannot cross between processes; use float32, "
                        "uint8 or int64" % np.dtype(dtype).name)
    return code


def array_of(t: abi.Tensor) -> Array:
    """A numpy view of an orch_tensor's pool bytes (writable: the node allocated it, or the
    convention that inputs are read-only is the node's to keep, as in ComfyUI)."""
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:
        raise TypeError("tensor of unknown dtype code %d" % t.dtype)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    count = 1
    for n in shape:
        count *= n
    if count == 0 or not t.data:
        return np.empty(shape, dtype)
    return np.asarray(_Memory(t.data, shape, dtype))


class _Memory:
    """Pool bytes as numpy's array interface describes them: an array over them is made without
    a ctypes array type per size (which costs more than the rest of a call). The pool stays
    mapped for the worker's life, so the array never outlives its memory."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address: int, shape: tuple[int, ...],
                 dtype: np.dtype[Any]) -> None:
        # What keeps the bytes alive, where the pool's mapping alone does not.
        self.owner: object = None
        self.__array_interface__: dict[str, object] = {
            "data": (address, False), "shape": shape, "typestr": dtype.str, "version": 3}


def to_node(t: abi.Tensor, torch_tensors: bool) -> NodeTensor:
    a = array_of(t)
    if torch_tensors:
        import torch
        return torch.from_numpy(a)
    return a


def as_array(value: Any) -> Array | None:
    """A numpy array over a node's tensor result (torch or numpy), or None when it is no
    tensor. A torch tensor on a device is brought to the CPU first: the pool is host memory."""
    if isinstance(value, np.ndarray):
        return value
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        array: Array = value.numpy()
        return array
    return None


_TORCH_CODES = {"torch.float32": abi.DTYPE_F32, "torch.uint8": abi.DTYPE_U8,
                "torch.int64": abi.DTYPE_I64}


def is_exactly(obj: NodeTensor, dtype_code: int, shape: Sequence[int],
               address: int) -> bool:
    """Whether `obj` (a numpy array or a torch tensor) is exactly these bytes: this dtype and
    shape, C-contiguous, at `address`."""
    if tuple(obj.shape) != tuple(shape):
        return False
    if isinstance(obj, np.ndarray):
        return (_CODES.get(obj.dtype) == dtype_code and obj.flags.c_contiguous and
                obj.ctypes.data == address)
    return (_TORCH_CODES.get(str(obj.dtype)) == dtype_code and obj.is_contiguous() and
            obj.data_ptr() == address)


def still_over(obj: NodeTensor, t: abi.Tensor) -> bool:
    """Whether `obj`, handed to node code over tensor `t`, still is exactly t's bytes: in-place
    reshapes (`a.shape = ...`, `unsqueeze_`), restrides (`transpose_`) and dtype changes
    (`a.dtype = ...`) keep the object."""
    return is_exactly(obj, t.dtype, [t.shape[i] for i in range(t.ndim)], t.data or 0)


def same_bytes(a: Array, t: abi.Tensor) -> bool:
    """Whether array `a` is exactly tensor `t`'s pool bytes: same address, shape and dtype, and
    contiguous, so `t` can be returned as it is."""
    if not a.flags.c_contiguous or a.ctypes.data != (t.data or 0):
        return False
    return (_CODES.get(a.dtype) == t.dtype and a.ndim == t.ndim and
            all(a.shape[i] == t.shape[i] for i in range(t.ndim)))
