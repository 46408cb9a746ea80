"""ComfyUI's V3 node classes (comfy_api `io.ComfyNode`: define_schema and execute as
classmethods) as the worker's node specs (docs/python.md). Available where the worker can import
comfy_api, that is, when the deployment names a ComfyUI root; a pack's V3 classes come from its
NODE_CLASS_MAPPINGS or its comfy_entrypoint() extension.

comfy_api's objects (the schema, its inputs and outputs, io.NodeOutput) are read by name, and are
Any here: ComfyUI is not type-checked with this package."""

from __future__ import annotations

import sys

from . import _schema

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import ModuleType
    from typing import Any

    from ._call import Call

# asyncio and inspect are imported where they are used, not with the package: asyncio alone is
# about 35 ms of a worker's start, and most packs never need it (docs/performance.md).


def _awaitable(value: object) -> bool:
    import inspect
    return inspect.isawaitable(value)


def is_v3(cls: object) -> bool:
    """A V3 node class, told apart as ComfyUI's executor does: by its base (every API version's
    ComfyNode derives from comfy_api.internal._ComfyNodeInternal). Never by V1 attributes missing:
    the real io.ComfyNode has INPUT_TYPES and FUNCTION ("EXECUTE_NORMALIZED") too."""
    if not isinstance(cls, type):
        return False
    internal = sys.modules.get("comfy_api.internal")
    base = getattr(internal, "_ComfyNodeInternal", None)
    if base is not None:
        return issubclass(cls, base)
    # A comfy_api older than comfy_api.internal: its ComfyNode is the base.
    return any(k.__name__ == "ComfyNode" and getattr(k, "__module__", "").startswith("comfy_api")
               for k in cls.__mro__[1:])


def _io_type(obj: Any) -> str:
    getter = getattr(obj, "get_io_type", None)
    kind = getter() if callable(getter) else getattr(obj, "io_type", None)
    return str(kind) if kind is not None else "*"


def _input_spec(i: Any) -> tuple[Any, dict[str, Any]]:
    """A V3 input as V1's INPUT_TYPES entry, so one schema reader serves both."""
    kind = _io_type(i)
    options = dict(i.as_dict()) if callable(getattr(i, "as_dict", None)) else {}
    options.pop("optional", None)  # V3's as_dict has it; V1's options never do
    for key in ("default", "min", "max", "step", "multiline", "tooltip"):
        if key not in options and getattr(i, key, None) is not None:
            options[key] = getattr(i, key)
    if kind == "COMBO":
        return (list(getattr(i, "options", []) or []), options)
    return (kind, options)


class V3Spec(_schema.NodeSpec):
    """A V3 class read once: its schema in the V1 spec's fields. NodeSpec.__init__ is not
    called: it reads the V1 attributes."""

    def __init__(self, class_type: str | None, cls: Any) -> None:
        schema = cls.define_schema()
        self.class_type = class_type or schema.node_id
        self.cls = cls
        self.display_name = getattr(schema, "display_name", None) or self.class_type
        self.inputs = [_schema.Input(i.id, _input_spec(i), not getattr(i, "optional", False))
                       for i in schema.inputs]
        self.dynamic_types = _dynamic_types()
        if any(i.type in self.dynamic_types for i in self.inputs):
            # The inputs a dynamic one opens ("mode.size") are named by the prompt's values:
            # they arrive together, and the tree's own code nests them (fill_hidden).
            self.inputs.append(_schema.Input(DYNAMIC_INPUTS, ("*", {}), False, rest=True))
        self.hidden = {}
        for h in getattr(schema, "hidden", None) or []:
            value = getattr(h, "value", h)
            self.hidden[str(value).lower()] = str(value)
        self.return_types = [_io_type(o) for o in schema.outputs]
        self.return_names: list[Any] = [
            getattr(o, "display_name", None) or getattr(o, "id", None) or self.return_types[k]
            for k, o in enumerate(schema.outputs)]
        self.function = "execute"
        # As ComfyUI's executor reads them: the class's attributes (a pack may set
        # INPUT_IS_LIST = True on a V3 class; the base's class properties answer the schema's),
        # the schema where a tree's base has no such property.
        declared = getattr(cls, "INPUT_IS_LIST", None)
        self.input_is_list = bool(getattr(schema, "is_input_list", False) if declared is None
                                  else declared)
        declared = getattr(cls, "OUTPUT_IS_LIST", None)
        self.output_is_list = ([bool(b) for b in declared] if isinstance(declared, (list, tuple))
                               else [bool(getattr(o, "is_output_list", False))
                                     for o in schema.outputs])
        self.output_node = bool(getattr(schema, "is_output_node", False))
        self.not_idempotent = bool(getattr(schema, "not_idempotent", False))
        self.category = str(getattr(schema, "category", "") or "")
        self.description = str(getattr(schema, "description", "") or "")
        self.deprecated = bool(getattr(schema, "is_deprecated", False))
        self.experimental = bool(getattr(schema, "is_experimental", False))
        self.enable_expand = bool(getattr(schema, "enable_expand", False))
        self.validate = self._on_prepared_class("validate_inputs")
        self.fingerprint = self._on_prepared_class("fingerprint_inputs")
        self.current: Any = cls  # the class prepared for the call in progress (fill_hidden)
        self.instances = {}

    def _on_prepared_class(self, name: str) -> Callable[..., Any] | None:
        """The pack's own `name` (None when it does not override the base's), called on the
        class prepared for the call (fill_hidden), as ComfyUI calls it, with the signature of the
        pack's own: the host reads that to choose what it passes."""
        own = _overridden(self.cls, name)
        if own is None:
            return None

        def on_prepared(**kwargs: Any) -> Any:
            return getattr(self.current, name)(**kwargs)
        import inspect
        # What inspect.signature reads, as for any function.
        on_prepared.__signature__ = inspect.signature(own)  # type: ignore[attr-defined]
        return on_prepared

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"inputs": {i.name: i.extras() for i in self.inputs},
                  "hidden": self.hidden,
                  "function": self.function,
                  "input_is_list": self.input_is_list,
                  "output_is_list": self.output_is_list,
                  "return_names": self.return_names,
                  "description": self.description,
                  "deprecated": self.deprecated,
                  "experimental": self.experimental,
                  "python_module": getattr(self.cls, "__module__", ""),
                  "enable_expand": self.enable_expand,
                  "api_version": 3}
        if self.validate is not None:
            schema["validate_inputs"] = self.validate_args()
        return schema

    def node_info(self) -> dict[str, Any]:
        """ComfyUI's /object_info entry: the class's own GET_NODE_INFO_V1, which server.py
        answers for a V3 class."""
        get = getattr(self.cls, "GET_NODE_INFO_V1", None)
        if callable(get):
            info: dict[str, Any] = get()
            return info
        return {"input": self.cls.INPUT_TYPES(), "output": self.return_types,
                "output_is_list": self.output_is_list, "output_name": self.return_names,
                "name": self.class_type, "display_name": self.display_name,
                "description": self.description, "category": self.category,
                "output_node": self.output_node, "deprecated": self.deprecated,
                "experimental": self.experimental,
                "python_module": getattr(self.cls, "RELATIVE_PYTHON_MODULE", "nodes")}

    def fill_hidden(self, call: Call, kwargs: dict[str, Any]) -> None:
        """V3 nodes read hidden values from cls.hidden, not from their arguments: as ComfyUI's
        executor does, the call runs on the class's PREPARE_CLASS_CLONE of the hidden values the
        schema lists (keyed by io.Hidden), in the form the tree takes (_v3_data), which also
        nests `kwargs`' dynamic inputs in place."""
        io = _io_module()
        hidden = getattr(io, "Hidden", None)
        values = {}
        for kind in self.hidden.values():
            key = hidden(kind) if hidden is not None and kind in _values_of(hidden) else kind
            values[key] = call.hidden(kind)
        prepare = getattr(self.cls, "PREPARE_CLASS_CLONE", None)
        if callable(prepare):
            self.current = prepare(self._v3_data(io, values, kwargs))
            return
        holder = getattr(io, "HiddenHolder", None)
        from_dict = getattr(holder, "from_dict", None)
        self.cls.hidden = (from_dict(values) if callable(from_dict) else
                           type("Hidden", (), {str(k).lower(): v for k, v in values.items()}))
        self.current = self.cls

    def dynamic_inputs(self, given: dict[str, Any]) -> dict[str, Any]:
        """The inputs its dynamic ones opened: named "<dynamic input>.<...>" by ComfyUI's
        finalize_prefix; any other name the call gave is none of this class's."""
        dynamic = {i.name for i in self.inputs if i.type in self.dynamic_types}
        return {k: v for k, v in given.items() if k.split(".", 1)[0] in dynamic and "." in k}

    def _v3_data(self, io: Any, hidden: dict[Any, Any], kwargs: dict[str, Any]) -> Any:
        """What the tree's PREPARE_CLASS_CLONE takes. A ComfyUI whose HiddenHolder reads a
        V3Data (from 2025-12-30, 0.7) gets one, made as its executor makes it: the dynamic
        paths from its get_finalized_class_inputs over the call's inputs, and `kwargs` nested
        by its build_nested_inputs. An older one takes the hidden values alone."""
        if not callable(getattr(getattr(io, "HiddenHolder", None), "from_v3_data", None)):
            return hidden
        v3_data: dict[str, Any] = {}
        finalize = getattr(io, "get_finalized_class_inputs", None)
        if callable(finalize):
            # ComfyUI reads the prompt's inputs here: one value each, never the lists of
            # INPUT_IS_LIST.
            live = {k: v[0] if self.input_is_list and isinstance(v, list) and v else v
                    for k, v in kwargs.items()}
            v3_data = dict(finalize(self.cls.INPUT_TYPES(), live)[2])
        v3_data["hidden_inputs"] = hidden
        nest = getattr(io, "build_nested_inputs", None)
        if v3_data.get("dynamic_paths") and callable(nest):
            nested = nest(kwargs, v3_data)
            kwargs.clear()
            kwargs.update(nested)
        return v3_data

    def call(self, node: str, kwargs: dict[str, Any]) -> Any:
        """execute on the prepared class, through ComfyUI's EXECUTE_NORMALIZED where the base
        has it (it checks expand against the schema and normalizes the return), as a V1-shaped
        {"result", "ui", "expand"}."""
        cls = self.current
        normalized = getattr(cls, "EXECUTE_NORMALIZED_ASYNC" if _is_coroutine(cls.execute)
                             else "EXECUTE_NORMALIZED", None)
        result = (normalized or cls.execute)(**kwargs)
        if _awaitable(result):
            import asyncio
            result = asyncio.run(_awaited(result))
        if result is None:
            return ()
        if isinstance(result, (tuple, list, dict)):
            return result
        out: dict[str, Any] = {"result": tuple(getattr(result, "args", None) or ())}
        ui = getattr(result, "ui", None)
        if ui is not None:
            out["ui"] = ui if isinstance(ui, dict) else ui.as_dict()
        if getattr(result, "expand", None) is not None:
            out["expand"] = result.expand
        return out


DYNAMIC_INPUTS = "orch_dynamic_inputs"  # the ABI input that carries them (INPUT_REST)


def _dynamic_types() -> set[str]:
    """The io types the tree expands by the prompt's values (DynamicCombo, Autogrow,
    DynamicSlot, ...: its DYNAMIC_INPUT_LOOKUP); none in a tree older than them."""
    return {str(k) for k in getattr(_io_module(), "DYNAMIC_INPUT_LOOKUP", None) or {}}


def _io_module() -> ModuleType | None:
    return sys.modules.get("comfy_api.latest._io") or sys.modules.get("comfy_api.latest.io")


def _values_of(enum_type: Any) -> set[Any]:
    return {m.value for m in enum_type}


def _is_coroutine(function: object) -> bool:
    import inspect
    return inspect.iscoroutinefunction(function)


def _overridden(cls: Any, name: str) -> Callable[..., Any] | None:
    """The class's `name` classmethod if the pack defines it: comfy_api's io.ComfyNode declares
    validate_inputs and fingerprint_inputs itself, raising NotImplementedError."""
    for klass in cls.__mro__:
        if name in vars(klass):
            if getattr(klass, "__module__", "").startswith("comfy_api"):
                return None
            return _schema._class_method(cls, name)
    return None


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def entrypoint_classes(module: ModuleType) -> list[Any]:
    """The node classes of a V3 pack's comfy_entrypoint() extension, if it has one."""
    entry = getattr(module, "comfy_entrypoint", None)
    if not callable(entry):
        return []

    async def collect() -> list[Any]:
        extension = entry()
        if _awaitable(extension):
            extension = await extension
        on_load = getattr(extension, "on_load", None)
        if callable(on_load):
            loaded = on_load()
            if _awaitable(loaded):
                await loaded
        nodes = extension.get_node_list()
        if _awaitable(nodes):
            nodes = await nodes
        return list(nodes)

    import asyncio
    return asyncio.run(collect())
