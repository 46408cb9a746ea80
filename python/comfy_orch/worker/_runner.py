"""One call into a Python pack's node class (docs/python.md): the node's FUNCTION, or one of
ComfyUI's class methods the host forwards before a prompt runs (VALIDATE_INPUTS, IS_CHANGED).
Inputs arrive as orch_values and are converted here; results and exceptions go back through the
node API.

A node's inputs, results and ui are whatever the pack made of them: Any here."""

from __future__ import annotations

import ctypes
import json
import logging
import math

from .._shared import abi, tensor_kind
from . import _call, _comfyui_hooks, _prompt_server, _schema, _torch_models, _values

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # The node ABI's arguments: the call's context, its input values and its output values.
    Context = ctypes._Pointer[abi.NodeContext]
    Values = ctypes._Pointer[abi.Value]
    Body = Callable[[_schema.NodeSpec, _call.Call, Values, Values], int]


class AlwaysChanged(Exception):
    """IS_CHANGED gave NaN: ComfyUI's "always changed", as NaN never equals itself. It crosses as
    a failed IS_CHANGED, which the host reads the same way (the node is never cached)."""


def _change_key(value: object) -> str | int | float | bool | None:
    """IS_CHANGED's result as a value that crosses: plain values as they are, anything else by
    its text."""
    if isinstance(value, float) and math.isnan(value):
        raise AlwaysChanged("IS_CHANGED returned NaN")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _send_ui(call: _call.Call, spec: _schema.NodeSpec, ui: Any) -> None:
    """A node's {"ui": {...}} (ComfyUI's executed message, and the history's outputs) through
    orch_node_api.ui. A UI that is not a dict, or not JSON, is dropped with a warning: it is
    what the client sees, never the node's result."""
    if ui is None or not abi.api_has(call.api, "ui"):
        return
    try:
        if not isinstance(ui, dict):
            raise TypeError("it is a %s, not a dict" % type(ui).__name__)
        text = json.dumps(ui, default=str, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        logging.warning("node %s (%s): its ui is not sent: %s", call.node_id, spec.class_type, exc)
        return
    if call.api.ui(call.ctx, text.encode("utf-8", "replace")) != 0:
        logging.warning("node %s (%s): its ui is not sent: the worker refused it (more than "
                        "1 MiB, or nested deeper than 8)", call.node_id, spec.class_type)


def _send_expand(call: _call.Call, spec: _schema.NodeSpec, graph: Any) -> None:
    """A node's {"expand": graph} (ComfyUI's subgraph expansion, its result being links into the
    graph) through orch_node_api.expand: ComfyUI runs the graph in the node's place. Never
    dropped: a graph that cannot cross fails the node."""
    if not abi.api_has(call.api, "expand"):
        raise NotImplementedError("%s returned a subgraph expansion ('expand'), and this worker's "
                                  "node API is older than 1.4: update comfy-orch" % spec.function)
    finalize = getattr(graph, "finalize", None)  # a GraphBuilder given as it is
    graph = finalize() if callable(finalize) else graph
    try:
        text = json.dumps(graph, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError("%s returned an 'expand' that is not a JSON graph: %s"
                        % (spec.function, exc)) from None
    if call.api.expand(call.ctx, text.encode("utf-8", "replace")) != 0:
        raise ValueError("%s returned an 'expand' the worker refused: not a dict of nodes, or "
                         "more than 1 MiB, or nested deeper than 8" % spec.function)


class Runner:
    """The worker's node set over the pack's classes, and each call into them."""

    def __init__(self, env: str, specs: list[_schema.NodeSpec]) -> None:
        self.env = env
        self.handles = _values.Handles(env)
        self.torch_tensors: bool | None = None  # decided at the first call (tensor_kind.use_torch)
        self.outputs_kept: list[object] = []
        self.builder = _schema.NodeSetBuilder(specs, self.callback)

    def callback(self, spec: _schema.NodeSpec,
                 method: str) -> Callable[[Context, Values, Values], int]:
        """The orch_node_execute_fn behind one of the class's functions."""
        body: Body = {"execute": self.execute, "validate": self.validate,
                      "fingerprint": self.fingerprint}[method]

        def run(ctx: Context, inputs: Values, outputs: Values) -> int:
            return self.run(spec, ctx, inputs, outputs, body)
        return run

    def run(self, spec: _schema.NodeSpec, ctx: Context, inputs: Values, outputs: Values,
            body: Body) -> int:
        raw = ctx.contents.api.contents.node_id(ctx)
        node = raw.decode("utf-8", "replace") if raw else "?"
        call = _call.Call(ctx, node)
        _comfyui_hooks.begin_call()
        _call.current = call
        _prompt_server.begin_call(call.hidden("client_id"))
        try:
            if self.torch_tensors is None:
                self.torch_tensors = tensor_kind.use_torch()
            call.torch_tensors = self.torch_tensors
            return body(spec, call, inputs, outputs)
        except _call.Interrupted:
            return abi.NODE_INTERRUPTED
        except BaseException as exc:  # noqa: B902 - everything becomes the node's error
            if type(exc).__name__ == "InterruptProcessingException":
                return abi.NODE_INTERRUPTED
            self.fail(call, exc)
            return abi.NODE_ERROR
        finally:
            try:
                _torch_models.end_call()  # what the call moved to the device, as models
            except Exception as exc:  # noqa: BLE001 - never the node's failure
                logging.warning("node %s: the torch modules it moved are not recorded: %s",
                                node, exc)
            # The worker copies the outputs after this callback returns: what they point to
            # (strings, container items) lives until the next call.
            self.outputs_kept = call.keep
            with _call.lock:  # the interrupt watcher reads the context under it
                _call.current = None

    def kwargs(self, spec: _schema.NodeSpec, call: _call.Call, inputs: Values,
               wanted: Callable[[str], bool] | None = None) -> dict[str, Any]:
        label = "node %s (%s)" % (call.node_id, spec.class_type)
        kwargs: dict[str, Any] = {}
        for k, i in enumerate(spec.inputs):
            if i.rest:  # the dynamic inputs, each under the name the call gave it
                kwargs.update(spec.dynamic_inputs(_values.items_of(
                    inputs[k], self.handles, label, bool(self.torch_tensors))))
                continue
            if wanted is not None and not wanted(i.name):
                continue
            value = _values.from_value(inputs[k], i.type, self.handles, label,
                                       bool(self.torch_tensors))
            if value is not None or i.required:
                # INPUT_IS_LIST: the host sends each input as its whole list; only a default the
                # worker filled in is a single item.
                if spec.input_is_list and not isinstance(value, list):
                    value = [value]
                kwargs[i.name] = value
        return kwargs

    def execute(self, spec: _schema.NodeSpec, call: _call.Call, inputs: Values,
                outputs: Values) -> int:
        kwargs = self.kwargs(spec, call, inputs)
        spec.fill_hidden(call, kwargs)
        result = spec.call(call.node_id, kwargs)
        if isinstance(result, dict):
            if result.get("expand") is not None:
                _send_expand(call, spec, result["expand"])
            _send_ui(call, spec, result.get("ui"))
            result = result.get("result", ())
        if not isinstance(result, (tuple, list)):
            raise TypeError("%s returned %s; a node returns a tuple, or a dict with 'result'"
                            % (spec.function, type(result).__name__))
        if len(result) < len(spec.return_types):
            raise TypeError("%s returned %d values for %d RETURN_TYPES"
                            % (spec.function, len(result), len(spec.return_types)))
        for k in range(len(spec.return_types)):
            value = result[k]
            # An OUTPUT_IS_LIST slot crosses as a list: the host maps its consumers over it.
            if k < len(spec.output_is_list) and spec.output_is_list[k]:
                if not isinstance(value, (list, tuple)):
                    raise TypeError("output %d is declared OUTPUT_IS_LIST but %s returned %s, "
                                    "not a list" % (k, spec.function, type(value).__name__))
                value = list(value)
            _values.to_value(value, outputs[k], call, self.handles)
        return abi.NODE_OK

    def validate(self, spec: _schema.NodeSpec, call: _call.Call, inputs: Values,
                 outputs: Values) -> int:
        """VALIDATE_INPUTS with the literal inputs it takes; anything but True refuses them,
        and its text is the reason (ComfyUI's custom_validation_failed)."""
        takes = spec.validate_args()
        wanted = None if takes["all_inputs"] else takes["inputs"].__contains__
        # Every input and hidden value as the call would have them (a V3 class's dynamic
        # inputs nested), then those the signature names (ComfyUI filters them alike).
        kwargs = self.kwargs(spec, call, inputs)
        spec.fill_hidden(call, kwargs)
        kwargs = {k: v for k, v in kwargs.items() if wanted is None or wanted(k)}
        if takes["input_types"]:
            types = call.hidden("INPUT_TYPES") or {}
            kwargs["input_types"] = [types] if spec.input_is_list else types
        assert spec.validate is not None  # the ABI calls validate only where the class has it
        verdict = spec.validate(**kwargs)
        if verdict is True:
            return abi.NODE_OK
        call.api.fail(call.ctx, b"custom_validation_failed",
                      str(verdict).encode("utf-8", "replace"))
        return abi.NODE_ERROR

    def fingerprint(self, spec: _schema.NodeSpec, call: _call.Call, inputs: Values,
                    outputs: Values) -> int:
        """IS_CHANGED (V3: fingerprint_inputs) with the literal inputs and the hidden values, as
        ComfyUI passes them: the change key."""
        kwargs = self.kwargs(spec, call, inputs)
        spec.fill_hidden(call, kwargs)
        assert spec.fingerprint is not None  # the ABI calls it only where the class has it
        returned = spec.fingerprint(**kwargs)
        try:
            key = _change_key(returned)
        except AlwaysChanged as exc:
            call.api.fail(call.ctx, b"always_changed", str(exc).encode())
            return abi.NODE_ERROR
        _values.to_value(key, outputs[0], call, self.handles)
        return abi.NODE_OK

    def fail(self, call: _call.Call, exc: BaseException) -> None:
        api = call.api
        api.fail(call.ctx, _call.qualified_name(type(exc)).encode("utf-8", "replace"),
                 str(exc).encode("utf-8", "replace"))
        if abi.api_has(api, "fail_traceback"):
            import traceback  # a failing node's cost, not every worker's start
            # ComfyUI's execution_error carries traceback.format_tb: the frames, one string
            # each, without the header or the exception's line (exception_message has it).
            lines = traceback.format_tb(exc.__traceback__)
            encoded = [line.encode("utf-8", "replace") for line in lines]
            array = (ctypes.c_char_p * len(encoded))(*encoded)
            api.fail_traceback(call.ctx, array, len(encoded))
