"""The host runtime from Python (docs/host-library.md): liborch_host.so through ctypes, for a
process that is itself the host, as ComfyUI is. It starts a deployment's workers, lists their
node classes and calls their nodes with Python values.

Tensors: a numpy array or CPU torch tensor given as an input is copied once into a pool block of
the host's; a tensor a worker returned is a view of the worker's block, never copied, and passed
back to another node as it is (the same block, no copy). A view keeps its block held until the
last Python reference to it goes; only then is the hold released.

    with Host("deployment.toml") as host:
        print(host.nodes()["classes"].keys())
        outputs = host.call("TestDouble", {"value": 21})
"""

import collections
import contextlib
import ctypes
import json
import os
import sys
import threading
import weakref

from . import _abi, _library

_NAME = "liborch_host.so"

OK, INVALID, FAILED = _abi.HOST_OK, _abi.HOST_INVALID, _abi.HOST_FAILED


class HostError(RuntimeError):
    """The host refused or failed: `code` is the error's type, as ComfyUI names errors. Where
    the host read a deployment and found errors, the message lists each one (file, line, key,
    what is wrong, how to fix it), as `comfy-orch validate` would: a log shows only the
    message."""

    def __init__(self, code, message, details=None):
        self.code = code
        self.message = message
        self.details = details or {}
        super().__init__("%s: %s%s" % (code, message, _diagnostic_lines(self.details)))


def _diagnostic_lines(details):
    """"\n  FILE:LINE:COLUMN: error: KEY: MESSAGE\n    fix: FIX" for each error diagnostic."""
    lines = []
    for d in details.get("diagnostics", []) if isinstance(details, dict) else []:
        if not isinstance(d, dict) or d.get("severity") != "error":
            continue
        where = ":".join(str(d[k]) for k in ("file", "line", "column") if d.get(k))
        key = "%s: " % d["key"] if d.get("key") else ""
        lines.append("\n  %s: error: %s%s" % (where or "deployment", key, d.get("message", "")))
        if d.get("fix"):
            lines.append("\n    fix: %s" % d["fix"])
    return "".join(lines)


class NodeError(HostError):
    """A node (or its worker) failed: `node` is its id, `traceback` the worker's lines.
    `interrupted` (the node stopped for an interrupt) and `retryable` (its worker was lost or
    is not ready: the same call may run later) say "not now" apart from "never", as the host's
    status code says it."""

    def __init__(self, error, status=FAILED):
        super().__init__(error.get("type", "node_error"), error.get("message", ""), error)
        self.node = error.get("node")
        self.traceback = error.get("traceback")
        self.interrupted = status == _abi.HOST_INTERRUPTED
        self.retryable = status == _abi.HOST_RETRYABLE


NodeResult = collections.namedtuple("NodeResult", "outputs ui expand", defaults=(None,))
NodeResult.__doc__ = """One node call's outputs (a list of Python values), the `ui` it returned
(ComfyUI's {"ui": ...} of the node, or None) and the subgraph it expands into (its {"expand":
graph}, its outputs then being links into the graph; or None)."""


class Block(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("segment", ctypes.c_uint32),
                ("generation", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("size", ctypes.c_uint64), ("data", ctypes.c_void_p)]


EventFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("deployment", ctypes.c_char_p), ("on_event", EventFn),
                ("user", ctypes.c_void_p), ("worker_executable", ctypes.c_char_p),
                ("comfyui", ctypes.c_char_p)]  # ORCH_HOST_2


def load_library():
    tried = _library.candidates(_NAME, "ORCH_HOST_LIBRARY")
    for path in tried:
        if os.path.isfile(path):
            break
    else:
        raise OSError("comfy_orch: %s not found (tried %s); set ORCH_HOST_LIBRARY to its path"
                      % (_NAME, ", ".join(tried)))
    lib = ctypes.CDLL(path)
    text, host, out = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "orch_host_start": (ctypes.c_int32, [ctypes.POINTER(Options), out, out]),
        "orch_host_nodes": (ctypes.c_void_p, [host]),
        "orch_host_begin_prompt": (ctypes.c_uint64, [host]),
        "orch_host_call": (ctypes.c_int32, [host, text, out]),
        "orch_host_allocate": (ctypes.c_int32, [host, ctypes.c_uint64, ctypes.POINTER(Block)]),
        "orch_host_map": (ctypes.c_int32, [host, ctypes.POINTER(Block)]),
        "orch_host_release": (ctypes.c_int32, [host, ctypes.POINTER(Block)]),
        "orch_host_free": (ctypes.c_void_p, [host, ctypes.c_int32, ctypes.c_int32]),
        "orch_host_status": (ctypes.c_void_p, [host]),
        "orch_host_models": (ctypes.c_void_p, [host]),
        "orch_host_pinned_reserve": (ctypes.c_int32, [host, ctypes.c_uint64]),
        "orch_host_pinned_release": (None, [host, ctypes.c_uint64]),
        "orch_host_evict": (ctypes.c_int32, [host, text, ctypes.c_uint32, ctypes.c_uint64, out]),
        "orch_host_interrupt": (None, [host]),
        "orch_host_string_free": (None, [ctypes.c_void_p]),
        "orch_host_stop": (None, [host]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class _Held:
    """One hold on a pool block: released when the last view over it goes (or at stop)."""

    __slots__ = ("block", "__weakref__")

    def __init__(self, block):
        self.block = block


class _Library:
    """The library's host pointer, shared by a Host and its finalizers. Calls count themselves
    in and stop waits for them; a finalizer only queues its block (it may run on any thread, at
    any allocation, even on the library's own thread inside an event), and the next call sends
    the queued releases."""

    def __init__(self, lib):
        self.lib = lib
        self.handle = None
        self.cond = threading.Condition()
        self.calls = 0
        self.released = collections.deque()

    @contextlib.contextmanager
    def use(self):
        with self.cond:
            if self.handle is None:
                raise HostError("stopped", "the host was stopped")
            self.calls += 1
            handle = self.handle
        try:
            while self.released:
                block = self.released.popleft()
                self.lib.orch_host_release(handle, ctypes.byref(block))
            yield handle
        finally:
            with self.cond:
                self.calls -= 1
                self.cond.notify_all()

    def stop(self):
        with self.cond:
            handle, self.handle = self.handle, None
            while self.calls:
                self.cond.wait()
        if handle is not None:
            self.released.clear()  # the stop releases every hold
            self.lib.orch_host_stop(handle)


class Host:
    """A host over `deployment` (a deployment file), or over `comfyui`: a description of a
    ComfyUI tree ({"root", "custom_nodes"?, "device"?, "protocol_level"?, "memory"?}: its
    arguments as the [memory] flags; docs/host-library.md)."""

    def __init__(self, deployment=None, on_event=None, worker_executable=None, comfyui=None):
        if deployment is None and comfyui is None:
            raise ValueError("Host needs a deployment file or a ComfyUI description")
        self._library = _Library(load_library())
        self._lib = self._library.lib
        self._blocks = {}  # (segment, generation, offset) -> weakref of its _Held
        self._views = {}   # id(view) -> (weakref of view, wire, address): tensors that may return
        self._by_wire = {}  # the wire form (as JSON text) -> weakref of the live view of it

        def deliver(_user, kind, data):
            if on_event is not None:
                try:
                    on_event(kind.decode(), json.loads(data.decode("utf-8", "replace")))
                except Exception:  # an event handler must never fail the host's thread
                    pass
        # Kept by the library until stop; it refers to no Host, so no cycle keeps one alive.
        self._event_fn = EventFn(deliver)
        options = Options(ctypes.sizeof(Options), 0,
                          os.fsencode(deployment) if deployment is not None else None,
                          self._event_fn, None,
                          os.fsencode(worker_executable) if worker_executable else None,
                          json.dumps(comfyui).encode("utf-8") if comfyui is not None else None)
        # The envs are built for this interpreter's stack (docs/envs.md): the host reads it from
        # here unless the deployment names another with [env] python.
        os.environ.setdefault("ORCH_HOST_PYTHON", sys.executable)
        handle, error = ctypes.c_void_p(), ctypes.c_void_p()
        status = self._lib.orch_host_start(ctypes.byref(options), ctypes.byref(handle),
                                           ctypes.byref(error))
        if status != OK:
            e = self._take_json(error.value) or {}
            raise HostError(e.get("code", "start_failed"), e.get("message", "the host did not start"),
                            e)
        self._library.handle = handle.value
        # Stopped when this Host goes, or at interpreter exit, whichever is first.
        self._stopper = weakref.finalize(self, self._library.stop)

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self):
        """Stops the workers and releases every block. Views kept past it stay readable (their
        bytes stay mapped, no longer the host's: docs/host-library.md)."""
        self._stopper()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- JSON in and out ---------------------------------------------------------------------

    def _take_json(self, pointer):
        if not pointer:
            return None
        try:
            return json.loads(ctypes.string_at(pointer).decode("utf-8", "replace"))
        finally:
            self._lib.orch_host_string_free(pointer)

    def nodes(self):
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_nodes(handle))

    def status(self):
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_status(handle))

    def free(self, unload_models=True, free_memory=True):
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_free(handle, int(unload_models),
                                                            int(free_memory)))

    def models(self):
        """Every worker's models as the host's stand-ins hold them: dicts with env, key, size,
        resident (the worker's last receipt), sequence and generation."""
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_models(handle)) or []

    def evict(self, env, generation, nbytes):
        """Asks env's worker (of that generation) to evict `nbytes`; returns its receipt
        {freed, resident, models}. HostError: the worker is gone, replaced ("stale_generation")
        or failed to answer."""
        with self._library.use() as handle:
            receipt = ctypes.c_void_p()
            status = self._lib.orch_host_evict(handle, str(env).encode("utf-8"), int(generation),
                                               max(0, int(nbytes)), ctypes.byref(receipt))
            body = self._take_json(receipt.value) or {}
            if status != OK:
                raise HostError(body.get("code", "failed"), body.get("message", ""), body)
            return body

    def pinned_reserve(self, nbytes):
        """Charges `nbytes` of this process's own pinning to the host's share of the one pinned
        budget; False when it does not fit (pin nothing then)."""
        with self._library.use() as handle:
            return self._lib.orch_host_pinned_reserve(handle, max(0, int(nbytes))) == OK

    def pinned_release(self, nbytes):
        with self._library.use() as handle:
            self._lib.orch_host_pinned_release(handle, max(0, int(nbytes)))

    def begin_prompt(self):
        with self._library.use() as handle:
            return self._lib.orch_host_begin_prompt(handle)

    def interrupt(self):
        with self._library.use() as handle:
            self._lib.orch_host_interrupt(handle)

    # -- calls -------------------------------------------------------------------------------

    def call(self, class_type, inputs, node="1", hidden=None, method=None):
        """Runs node `class_type` with `inputs` (name -> Python value) in its worker and returns
        its outputs as a list of Python values; raises NodeError when it failed."""
        return self.execute(class_type, inputs, node, hidden, method).outputs

    def execute(self, class_type, inputs, node="1", hidden=None, method=None):
        """call(), with the node's `ui` too: a NodeResult."""
        with self._library.use() as handle:
            keep = []  # the holds of tensors copied in, until the answer holds what it returns
            request = {"node": str(node), "class_type": class_type,
                       "inputs": {k: self._to_wire(handle, v, keep) for k, v in inputs.items()}}
            if hidden is not None:
                request["hidden"] = hidden
            if method is not None:
                request["method"] = method
            response = ctypes.c_void_p()
            status = self._lib.orch_host_call(handle, json.dumps(request).encode(),
                                              ctypes.byref(response))
            body = self._take_json(response.value) or {}
            holds = {self._key(d): self._hold(d) for d in body.get("held", [])}
            if status == INVALID:
                raise HostError(body.get("code", "invalid_request"), body.get("message", ""),
                                body)
            if status != OK:
                raise NodeError(body.get("error", {}), status)
            ui, expand = body.get("ui"), body.get("expand")
            return NodeResult([self._from_wire(handle, v, holds) for v in body.get("outputs", [])],
                              ui if isinstance(ui, dict) else None,
                              expand if isinstance(expand, dict) else None)

    # -- values ------------------------------------------------------------------------------

    @staticmethod
    def _key(d):
        return (int(d["segment"]), int(d["generation"]), int(d["offset"]))

    def _hold(self, d):
        return self._held(Block(ctypes.sizeof(Block), d["segment"], d["generation"], d["offset"],
                                d["size"], None))

    def _held(self, block):
        held = _Held(block)
        key = (block.segment, block.generation, block.offset)
        weakref.finalize(held, self._library.released.append, block)
        weakref.finalize(held, self._blocks.pop, key, None)
        self._blocks[key] = weakref.ref(held)
        return held

    def _to_wire(self, handle, value, keep):
        from . import _tensors
        if isinstance(value, (list, tuple)) and not _is_tensor(value):
            return [self._to_wire(handle, v, keep) for v in value]
        if isinstance(value, dict):
            return {"dict": {str(k): self._to_wire(handle, v, keep) for k, v in value.items()}}
        array = _tensors.as_array(value) if _is_tensor(value) else None
        if array is None:
            return value
        known = self._views.get(id(value))
        if known is not None and known[0]() is value:
            t = known[1]["tensor"]
            # A worker's tensor passed back as it is: the same block, no copy; unless node code
            # reshaped or retyped that very object in place since.
            if _tensors.is_exactly(value, t["dtype"], t["shape"], known[2]):
                return known[1]
        return self._copy_in(handle, array, keep)

    def _copy_in(self, handle, array, keep):
        import numpy as np
        from . import _tensors
        if not array.flags.c_contiguous:
            array = np.array(array, order="C")
        block = Block(ctypes.sizeof(Block))
        size = max(array.nbytes, 1)
        if self._lib.orch_host_allocate(handle, size, ctypes.byref(block)) != OK:
            raise MemoryError("the pinned pool has no room for a %d-byte tensor" % size)
        keep.append(self._held(block))
        ctypes.memmove(block.data, array.ctypes.data, array.nbytes)
        return {"tensor": {"dtype": _tensors.dtype_code(array.dtype), "shape": list(array.shape),
                           "descriptor": {"segment": block.segment,
                                          "generation": block.generation,
                                          "offset": block.offset, "size": block.size}}}

    def _from_wire(self, handle, value, holds):
        if isinstance(value, list):
            return [self._from_wire(handle, v, holds) for v in value]
        if not isinstance(value, dict):
            return value
        if "dict" in value:
            return {k: self._from_wire(handle, v, holds) for k, v in value["dict"].items()}
        if "tensor" not in value:
            return value
        return self._view(handle, value, holds)

    def _view(self, handle, wire, holds):
        import numpy as np
        from . import _tensors
        t = wire["tensor"]
        key = self._key(t["descriptor"])
        held = holds.get(key)
        if held is None:
            ref = self._blocks.get(key)
            held = ref() if ref is not None else None
        if held is None:
            raise HostError("not_held", "a worker returned a tensor in a block this process "
                            "does not hold")
        block = held.block
        if not block.data and self._lib.orch_host_map(handle, ctypes.byref(block)) != OK:
            raise HostError("not_held", "block %s cannot be mapped" % (key,))
        # A tensor that is already a live view here (a node passed its input through) comes
        # back as that same object: ComfyUI's caches and `is` checks see one tensor.
        text = json.dumps(wire, sort_keys=True)
        ref = self._by_wire.get(text)
        same = ref() if ref is not None else None
        if same is not None and _tensors.is_exactly(same, t["dtype"], t["shape"], block.data):
            return same
        dtype = {_abi.DTYPE_F32: np.float32, _abi.DTYPE_U8: np.uint8,
                 _abi.DTYPE_I64: np.int64}[t["dtype"]]
        memory = _tensors._Memory(block.data, tuple(t["shape"]), np.dtype(dtype))
        memory.owner = held  # the view's base keeps the hold alive
        array = np.asarray(memory)
        if _tensors.use_torch():
            import torch
            view = torch.from_numpy(array)
        else:
            view = array
        # Finalizers touch these maps with single dict operations only (no lock: they may run
        # while this thread holds one).
        self._views[id(view)] = (weakref.ref(view), wire, block.data)
        self._by_wire[text] = weakref.ref(view)
        weakref.finalize(view, self._views.pop, id(view), None)
        weakref.finalize(view, self._by_wire.pop, text, None)
        return view


def _is_tensor(value):
    from . import _tensors
    return _tensors.as_array(value) is not None
