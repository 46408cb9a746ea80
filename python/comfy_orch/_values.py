"""Node values between the worker runtime and Python (docs/python.md): literals by value,
tensors as pool views, lists, tuples and dicts of them as containers, and every other object as
a handle that stays in its worker (models never cross processes: nothing is pickled)."""

import ctypes
import os

import numpy as np

from . import _abi, _call, _serializers, _tensors

HANDLE_PREFIX = "comfy_orch.handle:"


class Handles:
    """Objects a node returned that cannot cross: kept here, named by a handle string."""

    def __init__(self, env):
        self.env = env
        self.objects = {}
        self.next = 0

    def put(self, obj):
        self.next += 1
        key = "%s%s:%d:%d:%s" % (HANDLE_PREFIX, self.env, os.getpid(), self.next,
                                 type(obj).__qualname__)
        self.objects[key] = obj
        return key

    def get(self, key, node):
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


def from_value(v, declared, handles, node, torch_tensors):
    """A Python value from an orch_value."""
    kind = v.kind
    if kind == _abi.VALUE_NONE:
        return None
    if kind == _abi.VALUE_INT:
        return int(v.i)
    if kind == _abi.VALUE_FLOAT:
        return float(v.f)
    if kind == _abi.VALUE_BOOL:
        return bool(v.i)
    if kind == _abi.VALUE_STRING:
        text = (v.s or b"").decode("utf-8", "replace")
        if text.startswith(HANDLE_PREFIX) and declared not in ("STRING", "COMBO"):
            return handles.get(text, node)
        return text
    if kind == _abi.VALUE_TENSOR:
        call = _call.current
        call.inputs.append(v.tensor)
        return call.handed_out(_tensors.to_node(v.tensor, torch_tensors), v.tensor)
    if kind in (_abi.VALUE_LIST, _abi.VALUE_DICT):
        count = max(int(v.i), 0)
        items = ctypes.cast(v.tensor.data, ctypes.POINTER(_abi.ValueItem)) if count else None
        values = [from_value(items[k].value, "*", handles, node, torch_tensors)
                  for k in range(count)]
        if kind == _abi.VALUE_LIST:
            return values
        return _serializers.decode({(items[k].key or b"").decode("utf-8", "replace"): values[k]
                                    for k in range(count)})
    raise TypeError("%s: input of unknown value kind %d" % (node, kind))


def to_value(obj, out, call, handles, depth=0):
    """Fills orch_value `out` from a node's result `obj`. Lists, tuples and dicts cross as
    containers, their tensors in the pool (LATENT, CONDITIONING); other objects stay here."""
    t = call.pool_tensor_of(obj)
    if t is not None:
        out.kind, out.tensor = _abi.VALUE_TENSOR, t
        return
    if isinstance(obj, np.generic):
        obj = obj.item()  # a numpy scalar is its Python value
    if isinstance(obj, tuple) and not _is_tensor(obj):
        obj = {_serializers.TUPLE: list(obj)}  # given back as a tuple (_serializers.decode)
    if isinstance(obj, (list, dict)) and not _is_tensor(obj):
        if depth >= _abi.MAX_VALUE_DEPTH:
            raise ValueError("a value nests lists and dicts deeper than %d levels; only that many "
                             "cross between processes" % _abi.MAX_VALUE_DEPTH)
        pairs = list(obj.items()) if isinstance(obj, dict) else [(None, x) for x in obj]
        items = (_abi.ValueItem * max(len(pairs), 1))()
        call.keep.append(items)
        for k, (key, item) in enumerate(pairs):
            if key is not None:
                name = str(key).encode("utf-8", "replace")
                call.keep.append(name)
                items[k].key = name
            to_value(item, items[k].value, call, handles, depth + 1)
        out.kind = _abi.VALUE_DICT if isinstance(obj, dict) else _abi.VALUE_LIST
        out.i = len(pairs)
        out.tensor.data = ctypes.cast(items, ctypes.c_void_p)
        return
    if obj is None:
        out.kind = _abi.VALUE_NONE
    elif isinstance(obj, bool):
        out.kind, out.i = _abi.VALUE_BOOL, int(obj)
    elif isinstance(obj, int) and -(1 << 63) <= obj < (1 << 63):
        out.kind, out.i = _abi.VALUE_INT, obj
    elif isinstance(obj, float):
        out.kind, out.f = _abi.VALUE_FLOAT, obj
    elif isinstance(obj, str):
        text = obj.encode("utf-8", "replace")
        call.keep.append(text)
        out.kind, out.s = _abi.VALUE_STRING, text
    else:
        array = _tensors.as_array(obj)
        marked = _serializers.encode(obj) if array is None else None
        if marked is not None:  # a pack's own type with its registered serializer
            to_value(marked, out, call, handles, depth)
            return
        if array is None:
            text = handles.put(obj).encode("utf-8")
            call.keep.append(text)
            out.kind, out.s = _abi.VALUE_STRING, text
            return
        out.kind = _abi.VALUE_TENSOR
        out.tensor = _pool_tensor(array, call)


def _is_tensor(obj):
    return _tensors.as_array(obj) is not None


def _pool_tensor(array, call):
    # Already in the pool (comfy_orch.empty, or an input passed through): no copy at all. The
    # object node code was given, returned as it is, is known without comparing bytes.
    for t in call.allocated + call.inputs:
        if _tensors.same_bytes(array, t):
            return t
    t = call.new_tensor(array.shape, array.dtype)
    view = _tensors.array_of(t)
    view[...] = array
    return t
