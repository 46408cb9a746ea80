"""ComfyUI V1 node classes that stand for a worker's classes (docs/comfyui.md): built from the
schema the worker reported, never from importing the pack. ComfyUI's executor calls them like
any node (FUNCTION, list mapping, hidden inputs); each call runs in the class's worker through
the host library, and IS_CHANGED and VALIDATE_INPUTS go to the worker too.

A schema is the worker's JSON, node values are whatever a pack made of them, and ComfyUI's
objects are not type-checked here: all three are Any."""

from __future__ import annotations

import copy
import inspect
import json
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from .._shared import serializers, tensor_kind
from .._shared.serializers import HANDLE_PREFIX
from ..host import Host, NodeError, NodeResult
from . import _handover, _runtime, _worker_traceback

if TYPE_CHECKING:
    # caller()'s call: (inputs, node, prompt, extra_pnginfo, method=None) -> NodeResult.
    WorkerCall = Callable[..., NodeResult]

# The node's id names each call, and the prompt marks where one prompt ends and the next begins
# (the epoch). ComfyUI runs every call inside an executing context that says both
# (comfy_execution.utils, a125cd84); a ComfyUI without it is asked for them as hidden inputs,
# which then show in its /object_info.
_ALWAYS_HIDDEN = {"orch_unique_id": "UNIQUE_ID", "orch_prompt": "PROMPT",
                  "orch_extra_pnginfo": "EXTRA_PNGINFO"}
_WIDGET_KEYS_NOT_OPTIONS = ("name", "type", "required", "options")


class WorkerObject:
    """A value that lives in a worker (a MODEL, a CLIP, a pack's own object): nodes of its env
    get it as it is, nodes of another env as it crosses (_handover.py). ComfyUI's process never
    has it: whatever touches it there gets an error naming the type and its owner."""

    __slots__ = ("handle", "type_name", "env")

    def __init__(self, handle: str, type_name: str, env: str) -> None:
        self.handle, self.type_name, self.env = handle, type_name, env

    def __getattr__(self, name: str) -> NoReturn:
        raise TypeError("this %s lives in the worker of env %s: only isolated nodes can use it "
                        "(it has no %r here, in ComfyUI's process)"
                        % (self.type_name, self.env, name))

    def __repr__(self) -> str:
        return "<%s in env %s>" % (self.type_name, self.env)


def executing_context_reader() -> Callable[[], Any] | None:
    """ComfyUI's get_executing_context (the running node's prompt_id and node_id), or None for a
    ComfyUI that has none."""
    try:
        from comfy_execution.utils import get_executing_context
    except Exception:  # an older ComfyUI, or none
        return None
    reader: Callable[[], Any] = get_executing_context
    return reader


class _Epochs:
    """A new prompt_id (or, in a ComfyUI without executing contexts, a new PROMPT object: ComfyUI
    passes every node of one prompt the same one) is a new prompt, and the host's epoch follows it
    (ledger workers then reset their cast buffers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: object = None

    def follow(self, host: Host, prompt: object) -> None:
        if prompt is None:
            return
        with self._lock:
            same = prompt == self._last if isinstance(prompt, str) else prompt is self._last
            if not same:
                self._last = prompt
                host.begin_prompt()


_epochs = _Epochs()


def input_types(schema: dict[str, Any]) -> dict[str, Any]:
    """ComfyUI's INPUT_TYPES() of a class, from its schema's inputs and hidden inputs, for a
    worker that reported no node_info (a native pack)."""
    out: dict[str, Any] = {"required": {}, "optional": {}}
    for spec in schema.get("inputs", []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        extras = {k: v for k, v in spec.items() if k not in _WIDGET_KEYS_NOT_OPTIONS}
        entry: tuple[Any, ...]
        if spec.get("type") == "COMBO":
            entry = (list(spec.get("options", [])), extras)
        else:
            kind = str(spec.get("type", "*"))
            entry = (kind, extras) if extras else (kind,)
        out["required" if spec.get("required", True) else "optional"][spec["name"]] = entry
    if schema.get("hidden"):
        out["hidden"] = dict(schema["hidden"])
    return out


def worker_node_info(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The /object_info entry the worker computed for the class, in its own key order (it
    crosses as text: the host's JSON maps sort keys), or None where it reported none."""
    text = schema.get("node_info_text")
    try:  # untrusted: a worker's text, bounded in size by the host's channel
        info = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
    return info if isinstance(info, dict) else None


def node_info(schema: dict[str, Any]) -> dict[str, Any]:
    """ComfyUI's /object_info entry of the worker's class: what its worker computed (server.py's
    node_info, a V3 class's GET_NODE_INFO_V1), else what the schema's fields say."""
    info = worker_node_info(schema)
    if info is not None:
        return info
    outputs = [str(t) for t in schema.get("outputs", [])]
    names = schema.get("return_names")
    return {"input": input_types(schema), "output": outputs,
            "output_is_list": list(schema.get("output_is_list") or [False] * len(outputs)),
            "output_name": names if isinstance(names, list) else outputs,
            "display_name": str(schema.get("display_name") or ""),
            "description": str(schema.get("description", "") or ""),
            "category": str(schema.get("category", "")),
            "output_node": bool(schema.get("output_node", False))}


def _interrupt_watch(host: Host, done: threading.Event) -> None:
    """ComfyUI's interrupt flag (comfy.model_management) reaches the running worker node."""
    management = sys.modules.get("comfy.model_management")
    check = getattr(management, "processing_interrupted", None)
    if check is None:
        return
    while not done.wait(0.05):
        if check():
            host.interrupt()
            return


def _to_worker(value: Any, hand_over: Callable[[Any], Any]) -> Any:
    """`value` as a call's input: plain values and tensors as they are; a worker object, or an
    object of ComfyUI's process, through `hand_over` (a handle for its own env, else what
    another env is given, _handover.py)."""
    if isinstance(value, WorkerObject):
        return hand_over(value)
    if isinstance(value, list):
        return [_to_worker(v, hand_over) for v in value]
    if isinstance(value, dict):
        return {k: _to_worker(v, hand_over) for k, v in value.items()}
    if isinstance(value, tuple) and serializers.encode(value) is None:
        return {serializers.TUPLE: [_to_worker(v, hand_over) for v in value]}
    marked = serializers.encode(value)  # a pack's type with its registered serializer
    if marked is not None:
        return marked
    numpy = sys.modules.get("numpy")
    if (numpy is not None and type(value) is numpy.ndarray
            and value.dtype in (numpy.float32, numpy.uint8, numpy.int64)):
        return {serializers.NDARRAY: value}  # in the pool, given back to the node as numpy
    if value is None or isinstance(value, (str, int, float, bool)) or tensor_kind.is_tensor(value):
        return value
    return hand_over(value)  # an object of ComfyUI's process: its pickle


def _from_worker(value: Any, type_name: str, env: str) -> Any:
    """A worker's result as ComfyUI's value: a handle (at any depth of lists, tuples and dicts)
    as a WorkerObject of the env it names, the marks decoded."""
    if isinstance(value, str) and value.startswith(HANDLE_PREFIX) and type_name != "STRING":
        owner = value[len(HANDLE_PREFIX):].split(":", 1)[0]
        return WorkerObject(value, type_name, owner or env)
    if isinstance(value, list):
        return [_from_worker(v, type_name, env) for v in value]
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(serializers.TUPLE),
                                                                  list):
        return tuple(_from_worker(v, "*", env) for v in value[serializers.TUPLE])
    if isinstance(value, dict) and serializers.MARK not in value and \
            serializers.NDARRAY not in value:
        return {k: _from_worker(v, "*", env) for k, v in value.items()}
    return serializers.decode_nested(value)


def _raise_as_comfyui(error: NodeError) -> NoReturn:
    """A worker's error as ComfyUI shows a node's: its interrupt as ComfyUI's own exception."""
    if error.interrupted:
        management = sys.modules.get("comfy.model_management")
        exc = getattr(management, "InterruptProcessingException", None)
        if exc is not None:
            raise exc() from error
    # Raised with the worker's frames as its own: they follow ComfyUI's in its traceback.
    raise _worker_traceback.attach(error, error.traceback)


def caller(host: Host, class_type: str, schema: dict[str, Any]) -> WorkerCall:
    """call(inputs, node, prompt, extra_pnginfo, method=None) -> NodeResult: one call of
    `class_type` in its worker, as ComfyUI's executor makes it of a node (or of its IS_CHANGED /
    VALIDATE_INPUTS with `method`): the epoch follows the prompt, ComfyUI's interrupt reaches
    the worker, a worker error is raised as ComfyUI shows a node's, and the node boundary syncs
    the stand-ins."""
    declared_hidden = set((schema.get("hidden") or {}).values())
    executing_context = executing_context_reader()
    env = schema.get("env")

    def hand_over(obj: Any) -> Any:
        if not isinstance(obj, WorkerObject):
            return _handover.pickled(obj, str(env))
        return obj.handle if obj.env == env else _handover.handed_over(host, obj, str(env))

    def call(inputs: dict[str, Any], node: object, prompt: Any, extra_pnginfo: Any,
             method: str | None = None) -> NodeResult:
        # Only what the class declares crosses (the host sends the same for run).
        hidden = {kind: value for kind, value in (("PROMPT", prompt),
                                                  ("EXTRA_PNGINFO", extra_pnginfo))
                  if kind in declared_hidden and value is not None} or None
        # The prompt's client, for PromptServer.instance.client_id in the worker (not a hidden
        # kind of ComfyUI's: no class declares it).
        client_id = getattr(getattr(getattr(sys.modules.get("server"), "PromptServer", None),
                                    "instance", None), "client_id", None)
        if isinstance(client_id, str) and client_id:
            hidden = dict(hidden or {}, client_id=client_id)
        context = executing_context() if executing_context is not None else None
        if context is not None:
            node = node or context.node_id
        if method is None:
            _epochs.follow(host, context.prompt_id if context is not None else prompt)
        done = threading.Event()
        watcher = threading.Thread(target=_interrupt_watch, args=(host, done), daemon=True)
        if method is None:
            watcher.start()
        try:
            crossing = {k: _to_worker(v, hand_over) for k, v in inputs.items()}
            return host.execute(class_type, crossing, node=str(node or "0"), hidden=hidden,
                                method=method)
        except NodeError as e:
            _raise_as_comfyui(e)
        finally:
            done.set()
            if method is None:
                _runtime.after_node()

    return call


def validation_signature(schema: dict[str, Any]) -> inspect.Signature | None:
    """The signature of the pack's own VALIDATE_INPUTS / validate_inputs, as its worker reported
    it (schema["validate_inputs"]): ComfyUI reads it with getfullargspec to choose what it passes
    and which inputs it still range-checks itself, so a proxy's **kwargs would turn every check
    off. None when the worker reported none."""
    declared = schema.get("validate_inputs")
    if not isinstance(declared, dict):
        return None
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    names = ["cls"] + [n for n in declared.get("inputs", []) if isinstance(n, str)
                       and n.isidentifier() and n != "cls"]
    if declared.get("input_types"):
        names.append("input_types")
    parameters = [inspect.Parameter(n, kind) for n in dict.fromkeys(names)]
    if declared.get("all_inputs"):
        parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(parameters)


def outputs_of(schema: dict[str, Any], results: list[Any]) -> tuple[Any, ...]:
    """A worker's results as the node's outputs: worker objects as handles of its env."""
    env = schema.get("env", "?")
    outputs = [str(t) for t in schema.get("outputs", [])]
    return tuple(_from_worker(results[k] if k < len(results) else None, outputs[k], env)
                 for k in range(len(outputs)))


def declared_order(types: dict[str, Any], order: object) -> dict[str, Any]:
    """INPUT_TYPES as the pack wrote it, from its worker's node_info: groups and inputs in the
    declared order (input_order, where the worker's entry has one well formed), each spec a
    tuple, as INPUT_TYPES() gives them."""
    order = order if isinstance(order, dict) else {}
    groups = ["required", "optional", "hidden"] + list(types)
    out: dict[str, Any] = {}
    for group in dict.fromkeys(g for g in groups if isinstance(types.get(g), dict)):
        entries = types[group]
        given = order.get(group)
        listed: list[Any] = given if isinstance(given, list) else []
        names = [n for n in listed if isinstance(n, str) and n in entries] + list(entries)
        out[group] = {name: tuple(entries[name]) if isinstance(entries[name], list)
                      else entries[name] for name in dict.fromkeys(names)}
    return out


def build_proxy(host: Host, class_type: str, schema: dict[str, Any]) -> type:
    """The V1 proxy class for `class_type`, reported by env schema["env"]: it declares what the
    pack's class declares (its node_info), so ComfyUI's /object_info shows it unchanged."""
    env = schema.get("env", "?")
    info = node_info(schema)
    declared_hidden = dict(schema.get("hidden") or {})
    by_kind = {kind: name for name, kind in declared_hidden.items()}
    asked = {} if executing_context_reader() is not None else _ALWAYS_HIDDEN
    declared_function = schema.get("function")
    function = declared_function if isinstance(declared_function, str) else "execute"
    worker_call = caller(host, class_type, schema)

    def inputs_types(cls: type) -> dict[str, Any]:
        types = declared_order(copy.deepcopy(info.get("input") or {"required": {}}),
                                info.get("input_order"))
        if asked:
            types.setdefault("hidden", {}).update(asked)
        return types

    def call(kwargs: dict[str, Any], method: str | None = None) -> NodeResult:
        inputs = {k: v for k, v in kwargs.items() if k not in asked and k not in declared_hidden}
        hidden = {kind: kwargs.get(name) for kind, name in by_kind.items()}
        return worker_call(inputs, kwargs.get("orch_unique_id") or hidden.get("UNIQUE_ID"),
                           kwargs.get("orch_prompt") or hidden.get("PROMPT"),
                           kwargs.get("orch_extra_pnginfo") or hidden.get("EXTRA_PNGINFO"),
                           method)

    def execute(self: object, **kwargs: Any) -> Any:
        # What the pack returned: its ui reaches ComfyUI's executed message and history too.
        result = call(kwargs)
        outputs = outputs_of(schema, result.outputs)
        if result.ui is None and result.expand is None:
            return outputs
        returned: dict[str, Any] = {"result": outputs}
        if result.ui is not None:
            returned["ui"] = result.ui
        if result.expand is not None:  # ComfyUI runs the subgraph; the outputs link into it
            returned["expand"] = result.expand
        return returned

    attrs: dict[str, Any] = {
        "INPUT_TYPES": classmethod(inputs_types),
        "RETURN_TYPES": tuple(info.get("output") or ()),
        "RETURN_NAMES": tuple(info.get("output_name") or ()),
        "OUTPUT_IS_LIST": tuple(bool(b) for b in info.get("output_is_list") or ()),
        "FUNCTION": function,
        function: execute,
        "CATEGORY": info.get("category", "sd"),
        "DESCRIPTION": info.get("description", ""),
        "OUTPUT_NODE": info.get("output_node") is True,
        "INPUT_IS_LIST": bool(schema.get("input_is_list", False)),
        "NOT_IDEMPOTENT": bool(schema.get("not_idempotent", False)),
        "COMFY_ORCH_ENV": env,
        "__module__": "comfy_orch.comfyui.proxies",
    }
    for key, attr in (("output_tooltips", "OUTPUT_TOOLTIPS"), ("deprecated", "DEPRECATED"),
                      ("experimental", "EXPERIMENTAL"), ("api_node", "API_NODE")):
        if key in info:
            attrs[attr] = info[key]
    if schema.get("has_is_changed"):
        attrs["IS_CHANGED"] = classmethod(
            lambda cls, **kwargs: (call(kwargs, "IS_CHANGED").outputs or [None])[0])
    if schema.get("has_validate_inputs"):
        def validate_inputs(cls: type, /, **kwargs: Any) -> Any:
            try:
                call(kwargs, "VALIDATE_INPUTS")
            except NodeError as e:
                return e.message  # ComfyUI shows a string as the validation failure
            return True
        signature = validation_signature(schema)
        if signature is not None:
            # What inspect.signature (ComfyUI's getfullargspec) reads.
            validate_inputs.__signature__ = signature  # type: ignore[attr-defined]
        attrs["VALIDATE_INPUTS"] = classmethod(validate_inputs)
    return type(class_type, (), attrs)
