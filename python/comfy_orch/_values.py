"""Node values between the worker runtime and Python (docs/python.md): literals by value,
tensors as pool views, and every other object as a handle that stays in its worker (models never
cross processes: nothing is pickled)."""

import os

from . import _abi, _call, _tensors

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
        _call.current.inputs.append(v.tensor)
        return _tensors.to_node(v.tensor, torch_tensors)
    raise TypeError("%s: input of unknown value kind %d" % (node, kind))


def to_value(obj, out, call, handles):
    """Fills orch_value `out` from a node's result `obj`."""
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
        if array is None:
            text = handles.put(obj).encode("utf-8")
            call.keep.append(text)
            out.kind, out.s = _abi.VALUE_STRING, text
            return
        out.kind = _abi.VALUE_TENSOR
        out.tensor = _pool_tensor(array, call)


def _pool_tensor(array, call):
    # Already in the pool (comfy_orch.empty, or an input passed through): no copy at all.
    for t in call.allocated + call.inputs:
        if _tensors.same_bytes(array, t):
            return t
    t = call.new_tensor(array.shape, array.dtype)
    view = _tensors.array_of(t)
    view[...] = array
    return t
