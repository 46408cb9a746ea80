"""The node call in progress and what node code may do during it (docs/python.md). Nodes run
one at a time on the worker's main thread, so one current call is all there is."""

import ctypes
import json
import threading

from . import _abi, _dynprompt


class Interrupted(Exception):
    """Raised by check_interrupted() once the prompt was interrupted; ends the node as ComfyUI's
    InterruptProcessingException does."""


class Call:
    def __init__(self, ctx, node_id):
        self.ctx = ctx
        self.api = ctx.contents.api.contents
        self.node_id = node_id
        self.allocated = []  # orch_tensor structs this call allocated (comfy_orch.empty)
        self.inputs = []     # orch_tensor structs of its tensor inputs
        # id(object) -> (object, orch_tensor) for every array or torch tensor this call handed
        # to node code over pool bytes: returning one of them as it is needs no comparison.
        self.pool_objects = {}
        self.keep = []       # what outputs point to: kept until the worker has copied them

    def status(self, what, status):
        if status == _abi.STATUS_OOM_RETRYABLE:
            raise MemoryError("%s: out of memory (retry after freeing)" % what)
        if status != _abi.STATUS_OK:
            raise RuntimeError("%s failed with orch_status %d" % (what, status))

    def hidden(self, kind):
        """ComfyUI's hidden value `kind` for this call: the node's id for UNIQUE_ID, what the
        host sent for PROMPT and EXTRA_PNGINFO, DYNPROMPT built from PROMPT, else None."""
        if kind == "UNIQUE_ID":
            return self.node_id
        if kind == "DYNPROMPT":
            return _dynprompt.dynamic_prompt(self.hidden("PROMPT"))
        if not _abi.api_has(self.api, "hidden"):
            return None
        text = self.api.hidden(self.ctx, kind.encode())
        return json.loads(text.decode("utf-8", "replace")) if text else None

    def new_tensor(self, shape, dtype):
        shape = tuple(int(n) for n in shape)
        if len(shape) > _abi.TENSOR_MAX_DIMS:
            raise ValueError("a tensor has at most %d dimensions" % _abi.TENSOR_MAX_DIMS)
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        from . import _tensors
        out = _abi.Tensor()
        self.status("output tensor %s" % (shape,),
                    self.api.output_tensor(self.ctx, _tensors.dtype_code(dtype), len(shape),
                                           dims, ctypes.byref(out)))
        self.allocated.append(out)
        return out

    def handed_out(self, obj, t):
        """Records that node code got `obj` over tensor `t`'s pool bytes; returns obj."""
        self.pool_objects[id(obj)] = (obj, t)
        return obj

    def pool_tensor_of(self, obj):
        """The orch_tensor `obj` was handed out over, when node code returns it as it is (not
        reshaped or restrided in place since), else None."""
        entry = self.pool_objects.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        from . import _tensors
        return entry[1] if _tensors.still_over(obj, entry[1]) else None


def qualified_name(exc_type):
    """An exception type as ComfyUI's exception_type names it."""
    module = exc_type.__module__
    return exc_type.__qualname__ if module == "builtins" else module + "." + exc_type.__qualname__


current = None  # the Call in progress, or None between calls
# Held to end a call, and by any other thread that uses the current call's context: the worker
# frees the context when execute returns.
lock = threading.Lock()


def require(what):
    if current is None:
        raise RuntimeError("comfy_orch.%s is only available inside a node's call" % what)
    return current
