"""ComfyUI V1 node classes as the node ABI's orch_node_set (docs/python.md). The ABI's fields
carry names, types, ranges and defaults; the rest of ComfyUI's schema (combo choices, widget
options, RETURN_NAMES, list flags, ...) goes in schema_json, which the host reads with them.

A pack's class is read by ComfyUI's attribute names, so it is Any here, and so are the values of
its INPUT_TYPES() and of the schema (JSON)."""

from __future__ import annotations

import ctypes
import json

from .._shared import abi

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    import _ctypes

    from ._call import Call

    # One function of a class (execute, VALIDATE_INPUTS, IS_CHANGED) as the node ABI calls it:
    # (ctx, inputs, outputs) -> status.
    NodeFunction = Callable[[Any, Any, Any], int]

LITERALS = ("INT", "FLOAT", "BOOLEAN", "STRING")
HIDDEN = ("PROMPT", "UNIQUE_ID", "EXTRA_PNGINFO", "DYNPROMPT")


def _plain(value: Any) -> Any:
    """`value` with everything JSON cannot say dropped (a schema is data, not objects)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()
                if isinstance(v, (str, int, float, bool, list, tuple, dict)) or v is None}
    return None


class Input:
    """One input of INPUT_TYPES(): its name, type, choices and widget options."""

    def __init__(self, name: str, spec: Any, required: bool, rest: bool = False) -> None:
        self.name = name
        self.required = required
        # Receives every input of a call that no other input names (ABI INPUT_REST): ComfyUI's
        # V3 dynamic inputs, named after the prompt's values ("mode.size").
        self.rest = rest
        kind = spec[0] if isinstance(spec, (list, tuple)) and spec else spec
        with_options = (isinstance(spec, (list, tuple)) and len(spec) > 1
                        and isinstance(spec[1], dict))
        self.options: dict[str, Any] = dict(spec[1]) if with_options else {}
        self.choices: list[str] | None = None
        self.type: str
        if isinstance(kind, (list, tuple)):
            self.type, self.choices = "COMBO", [str(c) for c in kind]
        elif kind == "COMBO" and isinstance(self.options.get("options"), (list, tuple)):
            self.type, self.choices = "COMBO", [str(c) for c in self.options["options"]]
        elif isinstance(kind, str):
            self.type = kind
        else:
            raise TypeError("input %r: type %r is neither a type name nor a list of choices"
                            % (name, kind))

    def extras(self) -> dict[str, Any]:
        extra: dict[str, Any] = _plain(self.options)
        if self.choices is not None:
            extra["options"] = self.choices
        return extra


class NodeSpec:
    """One V1 class, read once at start-up."""

    class_type: str
    cls: Any  # the pack's class, read by ComfyUI's attribute names
    display_name: str
    inputs: list[Input]
    hidden: dict[str, str]  # argument name -> kind (UNIQUE_ID, PROMPT, ...)
    return_types: list[str]
    function: str
    input_is_list: bool
    output_is_list: list[bool]
    output_node: bool
    not_idempotent: bool
    category: str
    validate: Callable[..., Any] | None  # VALIDATE_INPUTS
    fingerprint: Callable[..., Any] | None  # IS_CHANGED
    instances: dict[str, Any]  # node id -> the instance that runs it

    def __init__(self, class_type: str, cls: Any, display_name: str | None) -> None:
        self.class_type = class_type
        self.cls = cls
        self.mapped_display_name = display_name  # NODE_DISPLAY_NAME_MAPPINGS' entry, or None
        self.display_name = display_name or class_type
        types = cls.INPUT_TYPES()
        if not isinstance(types, dict):
            raise TypeError("%s.INPUT_TYPES() returned %s, not a dict" % (class_type,
                                                                         type(types).__name__))
        self.inputs = [Input(n, s, True) for n, s in (types.get("required") or {}).items()]
        self.inputs += [Input(n, s, False) for n, s in (types.get("optional") or {}).items()]
        # Hidden inputs are not widgets or links: the worker fills them at each call.
        self.hidden = {}
        for name, kind in (types.get("hidden") or {}).items():
            self.hidden[name] = kind if isinstance(kind, str) else str(kind)
        self.return_types = [str(t) if not isinstance(t, (list, tuple)) else "COMBO"
                             for t in getattr(cls, "RETURN_TYPES", ())]
        function = getattr(cls, "FUNCTION", None)
        if not isinstance(function, str) or not hasattr(cls, function):
            raise TypeError("%s: FUNCTION %r names no method of the class"
                            % (class_type, function))
        self.function = function
        self.input_is_list = bool(getattr(cls, "INPUT_IS_LIST", False))
        self.output_is_list = [bool(b) for b in getattr(cls, "OUTPUT_IS_LIST", ())]
        self.output_node = bool(getattr(cls, "OUTPUT_NODE", False))
        self.not_idempotent = bool(getattr(cls, "NOT_IDEMPOTENT", False))
        self.category = str(getattr(cls, "CATEGORY", ""))
        self.validate = _class_method(cls, "VALIDATE_INPUTS")
        self.fingerprint = _class_method(cls, "IS_CHANGED")
        self.instances = {}

    def call(self, node: str, kwargs: dict[str, Any]) -> Any:
        """Runs the node: ComfyUI keeps one instance per node id, and so does the worker."""
        instance = self.instances.get(node)
        if instance is None:
            instance = self.instances[node] = self.cls()
        return getattr(instance, self.function)(**kwargs)

    def validate_args(self) -> dict[str, Any]:
        """What VALIDATE_INPUTS takes, as ComfyUI reads it from the signature: the inputs it
        names (or all, with **kwargs) skip ComfyUI's own range and combo checks, and
        `input_types` skips the link type checks."""
        import inspect  # only for classes that have VALIDATE_INPUTS
        try:
            spec = inspect.getfullargspec(self.validate)
        except TypeError:
            return {"inputs": [], "all_inputs": True, "input_types": False}
        return {"inputs": [a for a in spec.args + spec.kwonlyargs if a != "input_types"],
                "all_inputs": spec.varkw is not None,
                "input_types": "input_types" in spec.args + spec.kwonlyargs}

    def dynamic_inputs(self, given: dict[str, Any]) -> dict[str, Any]:
        """Of the inputs a call named that the class does not declare, those it takes (a V1
        class: none)."""
        return {}

    def fill_hidden(self, call: Call, kwargs: dict[str, Any]) -> None:
        for name, kind in self.hidden.items():
            value = call.hidden(kind)
            kwargs[name] = [value] if self.input_is_list else value

    def schema_json(self) -> str:
        schema = self.schema()
        try:
            # As text: the host's JSON maps sort keys, and the entry is served in the pack's
            # order (options as its as_dict() made them; comfyui/_proxies.py reads it).
            schema["node_info_text"] = json.dumps(_plain(self.node_info()))
        except Exception:  # noqa: BLE001 - ComfyUI leaves such a class out of /object_info; the
            pass           # host serves the entry it builds from the fields above instead
        return json.dumps(schema)

    def node_info(self) -> dict[str, Any]:
        """The class's entry in ComfyUI's GET /object_info, as server.py's node_info builds it
        for a V1 class (ComfyUI a125cd84): what the host serves and the proxies declare, so a
        frontend draws the node as the pack wrote it."""
        cls = self.cls
        types = cls.INPUT_TYPES()
        outputs = cls.RETURN_TYPES
        info: dict[str, Any] = {"input": types,
                "input_order": {key: list(value.keys()) for key, value in types.items()},
                "output": outputs,
                "output_is_list": getattr(cls, "OUTPUT_IS_LIST", [False] * len(outputs)),
                "output_name": getattr(cls, "RETURN_NAMES", outputs),
                "name": self.class_type,
                "display_name": (self.mapped_display_name
                                 if self.mapped_display_name is not None else self.class_type),
                "description": getattr(cls, "DESCRIPTION", ""),
                "python_module": getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes"),
                "category": getattr(cls, "CATEGORY", "sd"),
                "output_node": getattr(cls, "OUTPUT_NODE", False) == True}  # noqa: E712
        if hasattr(cls, "OUTPUT_TOOLTIPS"):
            info["output_tooltips"] = cls.OUTPUT_TOOLTIPS
        if getattr(cls, "DEPRECATED", False):
            info["deprecated"] = True
        if getattr(cls, "EXPERIMENTAL", False):
            info["experimental"] = True
        if hasattr(cls, "API_NODE"):
            info["api_node"] = cls.API_NODE
        return info

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"inputs": {i.name: i.extras() for i in self.inputs},
                  "hidden": self.hidden,
                  "function": self.function,
                  "input_is_list": self.input_is_list,
                  "output_is_list": self.output_is_list}
        if self.validate is not None:
            schema["validate_inputs"] = self.validate_args()
        names = getattr(self.cls, "RETURN_NAMES", None)
        if names is not None:
            schema["return_names"] = [str(n) for n in names]
        for attr, key in (("DESCRIPTION", "description"), ("DEPRECATED", "deprecated"),
                          ("EXPERIMENTAL", "experimental"), ("OUTPUT_TOOLTIPS", "output_tooltips"),
                          ("SEARCH_ALIASES", "search_aliases")):
            if hasattr(self.cls, attr):
                schema[key] = _plain(getattr(self.cls, attr))
        schema["python_module"] = getattr(self.cls, "__module__", "")
        return schema


def _class_method(cls: Any, name: str) -> Callable[..., Any] | None:
    """ComfyUI calls VALIDATE_INPUTS and IS_CHANGED on the class, not on an instance."""
    method = getattr(cls, name, None)
    return method if callable(method) else None


def _literal(value: object, kind: str, out: abi.Value) -> bytes | None:
    if kind == "BOOLEAN":
        out.kind, out.i = abi.VALUE_BOOL, int(bool(value))
    elif kind == "INT" and isinstance(value, (int, float)) and not isinstance(value, bool):
        out.kind, out.i = abi.VALUE_INT, int(value)
    elif kind == "FLOAT" and isinstance(value, (int, float)):
        out.kind, out.f = abi.VALUE_FLOAT, float(value)
    elif isinstance(value, str):
        out.kind, out.s = abi.VALUE_STRING, value.encode("utf-8", "replace")
        return out.s
    return None


class NodeSetBuilder:
    """Owns every ctypes object the orch_node_set points to, for the worker's life."""

    def __init__(self, specs: list[NodeSpec],
                 callback: Callable[[NodeSpec, str], NodeFunction]) -> None:
        self.keep: list[object] = []
        classes = (abi.NodeClass * max(len(specs), 1))()
        for k, spec in enumerate(specs):
            c = classes[k]
            c.struct_size = ctypes.sizeof(abi.NodeClass)
            c.flags = ((abi.NODE_OUTPUT_NODE if spec.output_node else 0) |
                       (abi.NODE_NOT_IDEMPOTENT if spec.not_idempotent else 0))
            c.class_type = self._text(spec.class_type)
            c.display_name = self._text(spec.display_name)
            c.category = self._text(spec.category)
            inputs = (abi.NodeInput * max(len(spec.inputs), 1))()
            for j, i in enumerate(spec.inputs):
                self._input(inputs[j], i)
            self.keep.append(inputs)
            c.inputs = inputs
            c.input_count = len(spec.inputs)
            outputs = (ctypes.c_char_p * max(len(spec.return_types), 1))(
                *[self._text(t) for t in spec.return_types])
            self.keep.append(outputs)
            c.outputs = outputs
            c.output_count = len(spec.return_types)
            c.execute = self._function(callback(spec, "execute"))
            c.schema_json = self._text(spec.schema_json())
            if spec.validate is not None:
                c.validate_inputs = self._function(callback(spec, "validate"))
            if spec.fingerprint is not None:
                c.is_changed = self._function(callback(spec, "fingerprint"))
        self.keep.append(classes)
        self.node_set = abi.NodeSet(ctypes.sizeof(abi.NodeSet), abi.NODES_ABI_MAJOR, classes,
                                     len(specs), 0)

    def _function(self, fn: NodeFunction) -> _ctypes.CFuncPtr:
        pointer = abi.ExecuteFn(fn)
        self.keep.append(pointer)
        return pointer

    def _text(self, text: str) -> bytes:
        b = text.encode("utf-8", "replace")
        self.keep.append(b)
        return b

    def _input(self, out: abi.NodeInput, i: Input) -> None:
        out.struct_size = ctypes.sizeof(abi.NodeInput)
        out.name = self._text(i.name)
        out.type = self._text(i.type)
        out.flags = ((abi.INPUT_REQUIRED if i.required else 0) |
                     (abi.INPUT_REST if i.rest else 0))
        for key, flag, field in (("min", abi.INPUT_HAS_MIN, "min"),
                                 ("max", abi.INPUT_HAS_MAX, "max")):
            v = i.options.get(key)
            if (i.type in ("INT", "FLOAT") and isinstance(v, (int, float))
                    and not isinstance(v, bool)):
                setattr(out, field, float(v))
                out.flags |= flag
        # An absent optional input is not passed at all (ComfyUI's rule: the method's own
        # default applies), so only a required input's default goes in the struct; both reach
        # the host's catalogue through schema_json.
        if "default" in i.options and i.required:
            kept = _literal(i.options["default"], i.type, out.default_value)
            if out.default_value.kind != abi.VALUE_NONE:
                out.flags |= abi.INPUT_HAS_DEFAULT
                if kept is not None:
                    self.keep.append(kept)
