"""ComfyUI V3 proxies (docs/comfyui.md): for a class that is a V3 node in its worker
(schema["api_version"] == 3), where ComfyUI's process has comfy_api, the proxy is itself an
io.ComfyNode whose schema is built from the worker's, so ComfyUI's V3 executor, its V3 UI
features and its V3 validation see the node as the pack wrote it. Calls go through the same
caller as V1 proxies (_proxies.caller).

Each input is the worker's serialised one (GET_NODE_INFO_V1's (io_type, options)) rebuilt as an
input of this tree's io.Custom(io_type), so the tree reads every option itself, those of the
dynamic inputs of ComfyUI 0.8 included; the executor's V3Data, captured by PREPARE_CLASS_CLONE,
says how it nested them, and the worker is sent them flat. Where the worker reported no such
entry, inputs are built from the schema's fields with the keywords each constructor names
(an unknown one raises TypeError in comfy_api.latest._io) and the rest in extra_dict. Hidden
values are read from cls.hidden (a clone ComfyUI prepares per call), for the kinds the schema
lists; execute and the optional validate_inputs / fingerprint_inputs are classmethods.

comfy_api's io module and its classes are not type-checked here: they are Any."""

from __future__ import annotations

import copy
import inspect
from typing import Any

from ..host import Host, NodeError
from . import _proxies

_WIDGETS = {"INT": "Int", "FLOAT": "Float", "STRING": "String", "BOOLEAN": "Boolean",
            "COMBO": "Combo"}
_NOT_OPTIONS = ("name", "type", "required", "options")


def available() -> Any:
    """comfy_api.latest's io module when ComfyUI's process can import it, else None."""
    try:
        from comfy_api.latest import io
    except Exception:  # an older ComfyUI: V1 proxies serve it
        return None
    return io if hasattr(io, "ComfyNode") and hasattr(io, "Schema") else None


def _type(io: Any, name: str) -> Any:
    if name in _WIDGETS and hasattr(io, _WIDGETS[name]):
        return getattr(io, _WIDGETS[name])
    if name == "*" and hasattr(io, "AnyType"):
        return io.AnyType
    return io.Custom(name)


def _construct(factory: Any, positional: list[Any], options: dict[str, Any]) -> Any:
    """factory(*positional, **options) with only the keywords it names; the others go into its
    extra_dict (ComfyUI merges that into the V1 options), or are dropped where it has none."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory(*positional, **options)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return factory(*positional, **options)
    named = {k: v for k, v in options.items() if k in parameters}
    extra = {k: v for k, v in options.items() if k not in parameters}
    if extra and "extra_dict" in parameters:
        named["extra_dict"] = extra
    return factory(*positional, **named)


def _input(io: Any, spec: dict[str, Any]) -> Any:
    kind = str(spec.get("type", "*"))
    options = {k: v for k, v in spec.items() if k not in _NOT_OPTIONS}
    options["optional"] = not spec.get("required", True)
    if kind == "COMBO":
        options["options"] = list(spec.get("options", []))
    return _construct(_type(io, kind).Input, [spec["name"]], options)


def _verbatim_input(io: Any, name: str, spec: Any, optional: bool) -> Any:
    """One input of the pack's schema as its worker's tree serialised it (GET_NODE_INFO_V1's
    `(io_type, as_dict())`), rebuilt as an input of this tree's own io.Custom(io_type): the
    tree's INPUT_TYPES, validation and dynamic-input expansion (DynamicCombo's options,
    Autogrow's template, ...) read every option the pack gave, none of them known here."""
    io_type = spec[0] if isinstance(spec, (list, tuple)) and spec else spec
    options = dict(spec[1]) if (isinstance(spec, (list, tuple)) and len(spec) > 1
                                and isinstance(spec[1], dict)) else {}
    if isinstance(io_type, list):  # a V1-style combo: its choices are the type
        io_type, options = "COMBO", dict(options, options=io_type)

    class Verbatim(io.Custom(str(io_type)).Input):  # type: ignore[misc]
        def as_dict(self) -> dict[str, Any]:
            return dict(options, optional=self.optional)

    return Verbatim(name, optional=optional)


def _verbatim_inputs(io: Any, info: dict[str, Any]) -> list[Any] | None:
    """The inputs of the worker's GET_NODE_INFO_V1, in their declared order; None when it
    reported none."""
    declared = info.get("input")
    if not isinstance(declared, dict):
        return None
    given_order = info.get("input_order")
    order: dict[str, Any] = given_order if isinstance(given_order, dict) else {}
    inputs = []
    for group in ("required", "optional"):
        entries = declared.get(group)
        if not isinstance(entries, dict):
            continue
        listed = order.get(group)
        names = [n for n in (listed if isinstance(listed, list) else [])
                 if isinstance(n, str) and n in entries] + list(entries)
        inputs += [_verbatim_input(io, name, entries[name], group == "optional")
                   for name in dict.fromkeys(names)]
    return inputs


def _flat_inputs(nested: dict[str, Any], v3_data: Any) -> dict[str, Any]:
    """The inputs as the prompt names them, from those this tree's executor nested for the
    call (build_nested_inputs over v3_data's dynamic_paths, {input id: dotted path}): the worker
    nests them again with its own tree's code."""
    paths = v3_data.get("dynamic_paths") if isinstance(v3_data, dict) else None
    if not paths:
        return nested
    tops = {str(path).split(".")[0] for path in paths.values()}
    flat = {k: v for k, v in nested.items() if k not in tops or not isinstance(v, dict)}
    for key, path in paths.items():
        value: Any = nested
        for part in str(path).split("."):
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            flat.setdefault(key, value)
    return flat


def _outputs(io: Any, schema: dict[str, Any]) -> list[Any]:
    types = [str(t) for t in schema.get("outputs", [])]
    declared_names = schema.get("return_names")
    names = declared_names if isinstance(declared_names, list) else []
    lists = schema.get("output_is_list") or []
    return [_construct(_type(io, t).Output, [],
                       {"display_name": str(names[k]) if k < len(names) else t,
                        "is_output_list": bool(lists[k]) if k < len(lists) else False})
            for k, t in enumerate(types)]


def build_v3_proxy(io: Any, host: Host, class_type: str, schema: dict[str, Any]) -> type:
    """The io.ComfyNode proxy for `class_type`, reported by env schema["env"]."""
    call = _proxies.caller(host, class_type, schema)
    inputs = [s for s in schema.get("inputs", [])
              if isinstance(s, dict) and isinstance(s.get("name"), str)]
    info = _proxies.worker_node_info(schema)
    fields: dict[str, Any] = {"node_id": class_type,
              "display_name": str(schema.get("display_name") or class_type),
              "category": str(schema.get("category", "")),
              "description": str(schema.get("description", "") or ""),
              "is_output_node": bool(schema.get("output_node", False)),
              "is_input_list": bool(schema.get("input_is_list", False)),
              "is_deprecated": bool(schema.get("deprecated", False)),
              "is_experimental": bool(schema.get("experimental", False)),
              "not_idempotent": bool(schema.get("not_idempotent", False)),
              "enable_expand": bool(schema.get("enable_expand", False))}

    verbatim = _verbatim_inputs(io, info) if isinstance(info, dict) else None
    declared = verbatim if verbatim is not None else [_input(io, s) for s in inputs]

    def define_schema(cls: type) -> Any:
        # Every proxy asks for the node id and the prompt (the epoch), as V1 proxies do.
        hidden = [io.Hidden.unique_id, io.Hidden.prompt, io.Hidden.extra_pnginfo]
        return _construct(io.Schema, [], dict(fields, inputs=declared,
                                              outputs=_outputs(io, schema), hidden=hidden))

    def prepare_class_clone(cls: type, data: Any) -> Any:
        # The tree's own clone, whatever its argument (a125cd84: the hidden values; 0.7 on: a
        # V3Data), which execute reads back for the dynamic paths its inputs were nested by.
        clone = io.ComfyNode.PREPARE_CLASS_CLONE.__func__(cls, data)
        clone.orch_v3_data = data
        return clone

    def hidden_of(cls: type) -> tuple[Any, Any, Any]:
        h = getattr(cls, "hidden", None)
        return (getattr(h, "unique_id", None), getattr(h, "prompt", None),
                getattr(h, "extra_pnginfo", None))

    def execute(cls: type, /, **kwargs: Any) -> Any:
        result = call(_flat_inputs(kwargs, getattr(cls, "orch_v3_data", None)), *hidden_of(cls))
        return io.NodeOutput(*_proxies.outputs_of(schema, result.outputs), ui=result.ui,
                             expand=result.expand)

    attrs: dict[str, Any] = {"define_schema": classmethod(define_schema),
                             "execute": classmethod(execute),
                             "PREPARE_CLASS_CLONE": classmethod(prepare_class_clone),
                             "COMFY_ORCH_ENV": schema.get("env", "?"),
                             "__module__": "comfy_orch.comfyui.proxies"}
    if isinstance(info, dict):
        # ComfyUI's /object_info answers GET_NODE_INFO_V1 for a V3 class: the pack's own, as its
        # worker computed it, under the module name ComfyUI's loader gave this proxy.
        def get_node_info_v1(cls: type) -> dict[str, Any]:
            out = copy.deepcopy(info)  # in the pack's order: it crossed as text
            out["python_module"] = getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes")
            return out
        attrs["GET_NODE_INFO_V1"] = classmethod(get_node_info_v1)
    if schema.get("has_validate_inputs"):
        def validate_inputs(cls: type, /, **kwargs: Any) -> Any:
            try:
                call(_flat_inputs(kwargs, getattr(cls, "orch_v3_data", None)), None, None, None,
                     "VALIDATE_INPUTS")
            except NodeError as e:
                return e.message  # ComfyUI shows a string as the validation failure
            return True
        signature = _proxies.validation_signature(schema)
        if signature is not None:
            # What inspect.signature (ComfyUI's getfullargspec) reads.
            validate_inputs.__signature__ = signature  # type: ignore[attr-defined]
        attrs["validate_inputs"] = classmethod(validate_inputs)
    if schema.get("has_is_changed"):
        attrs["fingerprint_inputs"] = classmethod(
            lambda cls, **kwargs: (call(_flat_inputs(kwargs, getattr(cls, "orch_v3_data", None)),
                                        None, None, None, "IS_CHANGED").outputs
                                   or [None])[0])
    proxy: type = type(class_type, (io.ComfyNode,), attrs)
    return proxy
