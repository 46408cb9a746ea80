"""Node values between the worker runtime and Python (docs/python.md): literals by value,
tensors as pool views, lists, tuples and dicts of them as containers, and every other object as
a handle that stays in its worker; another env gets such an object only as _crossing hands it
over.

A node's values are whatever the pack made of them: Any, where they pass through here."""

from __future__ import annotations

import ctypes
import os
import sys

from .._shared import abi, serializers, tensor_kind
from .._shared.serializers import HANDLE_PREFIX
from . import _call, _crossing

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from typing import Any

    from .._shared.tensors import Array

__all__ = ["HANDLE_PREFIX", "Handles", "from_value", "to_value"]


class Handles:
    """Objects a node returned that cannot cross: kept here, named by a handle string."""

    def __init__(self, env: str) -> None:
        self.env = env
        self.objects: dict[str, Any] = {}
        self.next = 0

    def put(self, obj: object) -> str:
        self.next += 1
        key = "%s%s:%d:%d:%s" % (HANDLE_PREFIX, self.env, os.getpid(), self.next,
                                 type(obj).__qualname__)
        self.objects[key] = obj
        return key

    def get(self, key: str, node: str) -> Any:
        parts = key[len(HANDLE_PREFIX):].split(":", 3)
        if len(parts) != 4:
            raise ValueError("malformed object handle %r" % key)
        env, pid, _, type_name = parts
        if key in self.objects:
            return self.objects[key]
        if env != self.env:
            raise TypeError("%s: a %s made in env '%s' cannot be used in env '%s': objects that "
                            "are not tensors or plain values stay in the worker that made them; "
                            "run both nodes in one env" % (node, type_name, env, self.env))
        raise LookupError("%s: the %s this input names is gone (its worker %s restarted); "
                          "run the prompt again" % (node, type_name, pid))


def items_of(v: abi.Value, handles: Handles, node: str, torch_tensors: bool) -> dict[str, Any]:
    """A DICT's items, each a value of its own: the container is no value to decode (the
    dynamic inputs of a call are named by the prompt, whatever names it chose)."""
    if v.kind != abi.VALUE_DICT or int(v.i) <= 0:
        return {}
    items = ctypes.cast(v.tensor.data or 0, ctypes.POINTER(abi.ValueItem))
    return {(items[k].key or b"").decode("utf-8", "replace"):
            from_value(items[k].value, "*", handles, node, torch_tensors)
            for k in range(int(v.i))}


def from_value(v: abi.Value, declared: str, handles: Handles, node: str,
               torch_tensors: bool) -> Any:
    """A Python value from an orch_value."""
    kind = v.kind
    if kind == abi.VALUE_NONE:
        return None
    if kind == abi.VALUE_INT:
        return int(v.i)
    if kind == abi.VALUE_FLOAT:
        return float(v.f)
    if kind == abi.VALUE_BOOL:
        return bool(v.i)
    if kind == abi.VALUE_STRING:
        text = (v.s or b"").decode("utf-8", "replace")
        if text.startswith(HANDLE_PREFIX) and declared not in ("STRING", "COMBO"):
            return handles.get(text, node)
        return text
    if kind == abi.VALUE_TENSOR:
        tensors = tensor_kind.load_tensors()
        call = _call.require("a tensor input")  # values are read inside a call only
        call.inputs.append(v.tensor)
        return call.handed_out(tensors.to_node(v.tensor, torch_tensors), v.tensor)
    if kind in (abi.VALUE_LIST, abi.VALUE_DICT):
        count = max(int(v.i), 0)
        if not count:
            return [] if kind == abi.VALUE_LIST else serializers.decode({})
        items = ctypes.cast(v.tensor.data or 0, ctypes.POINTER(abi.ValueItem))
        values = [from_value(items[k].value, "*", handles, node, torch_tensors)
                  for k in range(count)]
        if kind == abi.VALUE_LIST:
            return values
        items_by_key = {(items[k].key or b"").decode("utf-8", "replace"): values[k]
                        for k in range(count)}
        if _crossing.is_crossing(items_by_key):  # an object another env handed over
            return _crossing.load(items_by_key, handles.env, node)
        return serializers.decode(items_by_key)
    raise TypeError("%s: input of unknown value kind %d" % (node, kind))


def to_value(obj: Any, out: abi.Value, call: _call.Call, handles: Handles,
             depth: int = 0) -> None:
    """Fills orch_value `out` from a node's result `obj`. Lists, tuples and dicts cross as
    containers, their tensors in the pool (LATENT, CONDITIONING); other objects stay here."""
    t = call.pool_tensor_of(obj)
    marked_ndarray = _marks_ndarray(obj, call)
    if t is not None and not marked_ndarray:
        out.kind, out.tensor = abi.VALUE_TENSOR, t
        return
    if marked_ndarray:  # {NDARRAY: the tensor}: the other side gives it back as numpy
        items = (abi.ValueItem * 1)()
        call.keep.append(items)
        items[0].key = serializers.NDARRAY.encode()
        items[0].value.kind = abi.VALUE_TENSOR
        items[0].value.tensor = t if t is not None else _pool_tensor(obj, call)
        out.kind, out.i, out.tensor.data = abi.VALUE_DICT, 1, ctypes.addressof(items)
        return
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.generic):
        obj = obj.item()  # a numpy scalar is its Python value
    if isinstance(obj, tuple) and not _is_tensor(obj):
        obj = {serializers.TUPLE: list(obj)}  # given back as a tuple (serializers.decode)
    if isinstance(obj, (list, dict)) and not _is_tensor(obj):
        if depth >= abi.MAX_VALUE_DEPTH:
            raise ValueError("a value nests lists and dicts deeper than %d levels; only that many "
                             "cross between processes" % abi.MAX_VALUE_DEPTH)
        pairs = list(obj.items()) if isinstance(obj, dict) else [(None, x) for x in obj]
        items = (abi.ValueItem * max(len(pairs), 1))()
        call.keep.append(items)
        for k, (key, item) in enumerate(pairs):
            if key is not None:
                name = str(key).encode("utf-8", "replace")
                call.keep.append(name)
                items[k].key = name
            to_value(item, items[k].value, call, handles, depth + 1)
        out.kind = abi.VALUE_DICT if isinstance(obj, dict) else abi.VALUE_LIST
        out.i = len(pairs)
        out.tensor.data = ctypes.addressof(items)
        return
    if obj is None:
        out.kind = abi.VALUE_NONE
    elif isinstance(obj, bool):
        out.kind, out.i = abi.VALUE_BOOL, int(obj)
    elif isinstance(obj, int) and -(1 << 63) <= obj < (1 << 63):
        out.kind, out.i = abi.VALUE_INT, obj
    elif isinstance(obj, float):
        out.kind, out.f = abi.VALUE_FLOAT, obj
    elif isinstance(obj, str):
        text = obj.encode("utf-8", "replace")
        call.keep.append(text)
        out.kind, out.s = abi.VALUE_STRING, text
    else:
        array = _as_array(obj)
        marked = serializers.encode(obj) if array is None else None
        if marked is not None:  # a pack's own type with its registered serializer
            to_value(marked, out, call, handles, depth)
            return
        if array is None:
            text = handles.put(obj).encode("utf-8")
            call.keep.append(text)
            out.kind, out.s = abi.VALUE_STRING, text
            return
        out.kind = abi.VALUE_TENSOR
        out.tensor = _pool_tensor(array, call)


def _marks_ndarray(obj: object, call: _call.Call) -> bool:
    """A numpy array where this worker's node code gets torch tensors: ComfyUI's process, and
    this worker's own inputs, would otherwise make a torch tensor of it. Where node code gets
    numpy arrays, a numpy array is its tensor and crosses as one."""
    numpy = sys.modules.get("numpy")
    if numpy is None or type(obj) is not numpy.ndarray or not call.torch_tensors:
        return False
    dtype: object = getattr(obj, "dtype", None)
    return dtype in (numpy.float32, numpy.uint8, numpy.int64)


def _as_array(obj: object) -> Array | None:
    """tensors.as_array, importing tensors (and numpy) only for a tensor. A numpy array of a
    dtype the pool does not carry (float64 vertices, ...) is None: an object like any other,
    it stays in its worker (a torch tensor of such a dtype is refused with the fix instead)."""
    if not tensor_kind.is_tensor(obj):
        return None
    numpy = sys.modules.get("numpy")
    if (numpy is not None and isinstance(obj, numpy.ndarray)
            and obj.dtype not in (numpy.float32, numpy.uint8, numpy.int64)):
        return None
    array: Array | None = tensor_kind.load_tensors().as_array(obj)
    return array


def _is_tensor(obj: object) -> bool:
    return _as_array(obj) is not None


def _pool_tensor(array: Array, call: _call.Call) -> abi.Tensor:
    tensors = tensor_kind.load_tensors()
    # Already in the pool (comfy_orch.empty, or an input passed through): no copy at all. The
    # object node code was given, returned as it is, is known without comparing bytes.
    for t in call.allocated + call.inputs:
        if tensors.same_bytes(array, t):
            return t
    t = call.new_tensor(array.shape, array.dtype)
    view = tensors.array_of(t)
    view[...] = array
    return t
