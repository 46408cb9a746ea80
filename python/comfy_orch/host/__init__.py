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

The host bindings' package: _library.py loads the library, _errors.py says its errors, and
_handle.py holds its host pointer and the holds on blocks. The host's answers are JSON, so they
are Any here, and so are node values (whatever a pack made of them)."""

from __future__ import annotations

import ctypes
import json
import os
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .._shared import abi
from ._errors import FAILED, INVALID, OK, HostError, NodeError
from ._handle import _Held, _Library
from ._library import Block, EventFn, Options, load_library

if TYPE_CHECKING:
    # numpy (through tensors) is imported where a tensor crosses, not with the package.
    from .._shared import tensors

    # A tensor's wire form's key: (segment, generation, offset) of its block.
    BlockKey = tuple[int, int, int]

__all__ = ["FAILED", "INVALID", "OK", "Block", "EventFn", "Host", "HostError", "NodeError",
           "NodeResult", "Options", "load_library"]


class NodeResult(NamedTuple):
    """One node call's outputs (a list of Python values), the `ui` it returned (ComfyUI's
    {"ui": ...} of the node, or None) and the subgraph it expands into (its {"expand": graph},
    its outputs then being links into the graph; or None)."""

    outputs: list[Any]
    ui: dict[str, Any] | None
    expand: dict[str, Any] | None = None


class Host:
    """A host over `deployment` (a deployment file), or over `comfyui`: a description of a
    ComfyUI tree ({"root", "custom_nodes"?, "device"?, "protocol_level"?, "memory"?}: its
    arguments as the [memory] flags; docs/host-library.md)."""

    def __init__(self, deployment: str | os.PathLike[str] | None = None,
                 on_event: Callable[[str, Any], object] | None = None,
                 worker_executable: str | os.PathLike[str] | None = None,
                 comfyui: dict[str, Any] | None = None) -> None:
        if deployment is None and comfyui is None:
            raise ValueError("Host needs a deployment file or a ComfyUI description")
        self._library = _Library(load_library())
        self._lib = self._library.lib
        self._blocks: dict[BlockKey, weakref.ref[_Held]] = {}  # -> the block's hold
        # id(view) -> (weakref of view, wire, address): tensors that may return
        self._views: dict[int, tuple[weakref.ref[Any], dict[str, Any], int | None]] = {}
        self._by_wire: dict[str, weakref.ref[Any]] = {}  # wire form as JSON -> its live view

        def deliver(_user: int | None, kind: bytes, data: bytes) -> None:
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
            raise HostError(e.get("code", "start_failed"),
                            e.get("message", "the host did not start"), e)
        self._library.handle = handle.value
        # Stopped when this Host goes, or at interpreter exit, whichever is first.
        self._stopper = weakref.finalize(self, self._library.stop)

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops the workers and releases every block. Views kept past it stay readable (their
        bytes stay mapped, no longer the host's: docs/host-library.md)."""
        self._stopper()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- JSON in and out ---------------------------------------------------------------------

    def _take_json(self, pointer: int | None) -> Any:
        if not pointer:
            return None
        try:
            return json.loads(ctypes.string_at(pointer).decode("utf-8", "replace"))
        finally:
            self._lib.orch_host_string_free(pointer)

    def nodes(self) -> Any:
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_nodes(handle))

    def status(self) -> Any:
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_status(handle))

    def free(self, unload_models: bool = True, free_memory: bool = True) -> Any:
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_free(handle, int(unload_models),
                                                            int(free_memory)))

    def models(self) -> Any:
        """Every worker's models as the host's stand-ins hold them: dicts with env, key, size,
        resident (the worker's last receipt), sequence and generation."""
        with self._library.use() as handle:
            return self._take_json(self._lib.orch_host_models(handle)) or []

    def evict(self, env: str, generation: int, nbytes: int) -> Any:
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

    def pinned_reserve(self, nbytes: int) -> bool:
        """Charges `nbytes` of this process's own pinning to the host's share of the one pinned
        budget; False when it does not fit (pin nothing then)."""
        with self._library.use() as handle:
            return bool(self._lib.orch_host_pinned_reserve(handle, max(0, int(nbytes))) == OK)

    def pinned_release(self, nbytes: int) -> None:
        with self._library.use() as handle:
            self._lib.orch_host_pinned_release(handle, max(0, int(nbytes)))

    def begin_prompt(self) -> int:
        with self._library.use() as handle:
            return int(self._lib.orch_host_begin_prompt(handle))

    def interrupt(self) -> None:
        with self._library.use() as handle:
            self._lib.orch_host_interrupt(handle)

    # -- calls -------------------------------------------------------------------------------

    def call(self, class_type: str, inputs: dict[str, Any], node: str | int = "1",
             hidden: dict[str, Any] | None = None, method: str | None = None) -> list[Any]:
        """Runs node `class_type` with `inputs` (name -> Python value) in its worker and returns
        its outputs as a list of Python values; raises NodeError when it failed."""
        return self.execute(class_type, inputs, node, hidden, method).outputs

    def execute(self, class_type: str, inputs: dict[str, Any], node: str | int = "1",
                hidden: dict[str, Any] | None = None,
                method: str | None = None) -> NodeResult:
        """call(), with the node's `ui` too: a NodeResult."""
        with self._library.use() as handle:
            keep: list[_Held] = []  # holds of tensors copied in, until the answer holds them
            request: dict[str, Any] = {
                "node": str(node), "class_type": class_type,
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
    def _key(d: dict[str, Any]) -> BlockKey:
        return (int(d["segment"]), int(d["generation"]), int(d["offset"]))

    def _hold(self, d: dict[str, Any]) -> _Held:
        return self._held(Block(ctypes.sizeof(Block), d["segment"], d["generation"], d["offset"],
                                d["size"], None))

    def _held(self, block: Block) -> _Held:
        held = _Held(block)
        key = (block.segment, block.generation, block.offset)
        weakref.finalize(held, self._library.released.append, block)
        weakref.finalize(held, self._blocks.pop, key, None)
        self._blocks[key] = weakref.ref(held)
        return held

    def _to_wire(self, handle: int, value: Any, keep: list[_Held]) -> Any:
        from .._shared import tensors
        if isinstance(value, (list, tuple)) and not _is_tensor(value):
            return [self._to_wire(handle, v, keep) for v in value]
        if isinstance(value, dict):
            items = {str(k): self._to_wire(handle, v, keep) for k, v in value.items()}
            return {"dict": items, "order": list(items)}  # the host's JSON maps sort keys
        array = tensors.as_array(value) if _is_tensor(value) else None
        if array is None:
            return value
        known = self._views.get(id(value))
        if known is not None and known[0]() is value:
            t = known[1]["tensor"]
            # A worker's tensor passed back as it is: the same block, no copy; unless node code
            # reshaped or retyped that very object in place since.
            if tensors.is_exactly(value, t["dtype"], t["shape"], known[2] or 0):
                return known[1]
        return self._copy_in(handle, array, keep)

    def _copy_in(self, handle: int, array: tensors.Array,
                 keep: list[_Held]) -> dict[str, Any]:
        import numpy as np

        from .._shared import tensors
        if not array.flags.c_contiguous:
            array = np.array(array, order="C")
        block = Block(ctypes.sizeof(Block))
        size = max(array.nbytes, 1)
        if self._lib.orch_host_allocate(handle, size, ctypes.byref(block)) != OK:
            raise MemoryError("the pinned pool has no room for a %d-byte tensor" % size)
        keep.append(self._held(block))
        ctypes.memmove(block.data or 0, array.ctypes.data, array.nbytes)  # allocated: mapped
        return {"tensor": {"dtype": tensors.dtype_code(array.dtype), "shape": list(array.shape),
                           "descriptor": {"segment": block.segment,
                                          "generation": block.generation,
                                          "offset": block.offset, "size": block.size}}}

    def _from_wire(self, handle: int, value: Any, holds: dict[BlockKey, _Held]) -> Any:
        if isinstance(value, list):
            return [self._from_wire(handle, v, holds) for v in value]
        if not isinstance(value, dict):
            return value
        if "dict" in value:
            items = value["dict"]
            order = value.get("order")
            # The producer's order of keys, where it came along (the host's own JSON maps are
            # sorted).
            keys = (order if isinstance(order, list) and all(isinstance(k, str) for k in order)
                    and sorted(order) == sorted(items) else list(items))
            return {k: self._from_wire(handle, items[k], holds) for k in keys}
        if "tensor" not in value:
            return value
        return self._view(handle, value, holds)

    def _view(self, handle: int, wire: dict[str, Any], holds: dict[BlockKey, _Held]) -> Any:
        import numpy as np

        from .._shared import tensor_kind, tensors
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
        if same is not None and tensors.is_exactly(same, t["dtype"], t["shape"],
                                                   block.data or 0):
            return same
        dtype = {abi.DTYPE_F32: np.float32, abi.DTYPE_U8: np.uint8,
                 abi.DTYPE_I64: np.int64}[t["dtype"]]
        memory = tensors._Memory(block.data or 0, tuple(t["shape"]), np.dtype(dtype))
        memory.owner = held  # the view's base keeps the hold alive
        array = np.asarray(memory)
        if tensor_kind.use_torch():
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


def _is_tensor(value: object) -> bool:
    from .._shared import tensors
    return tensors.as_array(value) is not None
