"""The V3 io module's shapes: typed inputs and outputs, the schema, the node base class.

The members comfy-orch touches behave as in ComfyUI a125cd84 (docs/comfyui-fixture.md has the
table): ComfyNode derives from comfy_api.internal._ComfyNodeInternal and has V1's INPUT_TYPES
and FUNCTION ("EXECUTE_NORMALIZED"); HiddenHolder takes six required values and is built with
from_dict; NodeOutput derives from _NodeOutputInternal; GET_NODE_INFO_V1 is asdict() of
Schema.get_v1_info (fifteen keys, None where unset; an input is (io_type, as_dict() without
"optional"); a hidden one is keyed by the io.Hidden member's name, valued (its value,));
python_module is the class's RELATIVE_PYTHON_MODULE, which ComfyUI's loader sets.

Two ComfyUIs in one tree (docs/comfyui-fixture.md has a column for each): ComfyUI 0.8
(pollockjj/ComfyUI 618b803d) by default, a125cd84 (0.3.64) where ORCH_TEST_COMFYUI_CONVENTIONS
is "0.3.64". They differ here in what PREPARE_CLASS_CLONE takes (a V3Data from 0.7, the hidden
values before) and in the dynamic inputs 0.8 has (DynamicCombo, Autogrow: DYNAMIC_INPUT_LOOKUP,
get_finalized_class_inputs, build_nested_inputs), which a125cd84 lacks."""

import dataclasses
import enum
import inspect
import os

V3_DATA = os.environ.get("ORCH_TEST_COMFYUI_CONVENTIONS", "0.8") != "0.3.64"

from comfy_api.internal import _ComfyNodeInternal, _NodeOutputInternal, prune_dict


class Hidden(str, enum.Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"
    auth_token_comfy_org = "AUTH_TOKEN_COMFY_ORG"
    api_key_comfy_org = "API_KEY_COMFY_ORG"


class Input:
    """Every input's base: extra_dict's keys join its V1 options (as_dict)."""

    io_type = None

    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None,
                 extra_dict=None):
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.lazy = lazy
        self.extra_dict = extra_dict or {}

    def get_io_type(self):
        return self.io_type

    def as_dict(self):
        return prune_dict({"display_name": self.display_name, "optional": self.optional,
                           "tooltip": self.tooltip, "lazy": self.lazy}) | prune_dict(
                               self.extra_dict)


class _Widget(Input):
    """A widget input: its type's own options (min, max, step, multiline, ...) come after the
    base's keys, as each real type's as_dict adds them."""

    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None,
                 default=None, socketless=None, force_input=None, **options):
        super().__init__(id, display_name, optional, tooltip, lazy)
        self.default = default
        self.socketless = socketless
        self.force_input = force_input
        self.options_extra = options

    def as_dict(self):
        return (super().as_dict() |
                prune_dict({"default": self.default, "socketless": self.socketless,
                            "forceInput": self.force_input}) |
                prune_dict(self.options_extra))


class _Output:
    io_type = None

    def __init__(self, id=None, display_name=None, tooltip=None, is_output_list=False):
        self.id = id
        self.display_name = display_name
        self.tooltip = tooltip
        self.is_output_list = is_output_list

    def get_io_type(self):
        return self.io_type


def _comfytype(io_type, widget):
    base = _Widget if widget else Input

    class Type:
        class Input(base):
            pass

        class Output(_Output):
            pass

    Type.io_type = io_type
    Type.Input.io_type = io_type
    Type.Output.io_type = io_type
    return Type


def Custom(io_type):
    """A type of any name (a pack's own, or a core type the io module does not name)."""
    return _comfytype(io_type, False)


AnyType = _comfytype("*", False)
Int = _comfytype("INT", True)
Float = _comfytype("FLOAT", True)
String = _comfytype("STRING", True)
Boolean = _comfytype("BOOLEAN", True)
Image = _comfytype("IMAGE", False)
Mask = _comfytype("MASK", False)
Latent = _comfytype("LATENT", False)
Model = _comfytype("MODEL", False)


class Combo:
    io_type = "COMBO"

    class Input(_Widget):
        io_type = "COMBO"

        def __init__(self, id, options=None, **kwargs):
            super().__init__(id, **kwargs)
            self.options = list(options or [])

        def as_dict(self):
            return super().as_dict() | {"multiselect": False, "options": self.options}

    class Output(_Output):
        io_type = "COMBO"


if V3_DATA:
    class DynamicCombo:
        """A combo whose choice opens inputs of its own (ComfyUI 0.8): its V1 options list
        each choice as {"key", "inputs": V1 input dict}; the prompt names an opened input
        "<combo>.<input>", and the node gets {combo: {combo: choice, input: value}}."""

        io_type = "COMFY_DYNAMICCOMBO_V3"

        class Option:
            def __init__(self, key, inputs):
                self.key, self.inputs = key, inputs

            def as_dict(self):
                return {"key": self.key, "inputs": _v1_inputs(self.inputs)}

        class Input(Input):
            io_type = "COMFY_DYNAMICCOMBO_V3"

            def __init__(self, id, options, **kwargs):
                super().__init__(id, **kwargs)
                self.options = options

            def as_dict(self):
                return super().as_dict() | {"options": [o.as_dict() for o in self.options]}

        @staticmethod
        def expand(out, live, value, group, prefix):
            own = _dotted(prefix)
            if own not in live:
                return
            chosen = [o for o in value[1]["options"] if o["key"] == live[own]]
            if chosen:
                _parse(out, live, chosen[0]["inputs"], prefix)
                out[group][own] = value
                out["dynamic_paths"][own] = _dotted(prefix + [prefix[-1]])

    class Autogrow:
        """Inputs made from one template, as many as the prompt links (ComfyUI 0.8): a
        TemplatePrefix names them <prefix>0 .. <prefix>max-1; the first `min` are required."""

        io_type = "COMFY_AUTOGROW_V3"

        class TemplatePrefix:
            def __init__(self, input, prefix, min=1, max=10):
                self.input, self.prefix, self.min, self.max = input, prefix, min, max

            def as_dict(self):
                return {"input": _v1_inputs([self.input]), "prefix": self.prefix,
                        "min": self.min, "max": self.max}

        class Input(Input):
            io_type = "COMFY_AUTOGROW_V3"

            def __init__(self, id, template, **kwargs):
                super().__init__(id, **kwargs)
                self.template = template

            def as_dict(self):
                return super().as_dict() | {"template": self.template.as_dict()}

        @staticmethod
        def expand(out, live, value, group, prefix):
            template = value[1]["template"]
            spec = [v for inputs in template["input"].values() for v in inputs.values()][0]
            opened = {}
            for k in range(template["max"]):
                name = "%s%d" % (template["prefix"], k)
                if _dotted(prefix + [name]) in live:
                    opened.setdefault("required" if k < template["min"] else "optional",
                                      {})[name] = spec
            _parse(out, live, opened, prefix)

    DYNAMIC_INPUT_LOOKUP = {DynamicCombo.io_type: DynamicCombo.expand,
                            Autogrow.io_type: Autogrow.expand}

    def _dotted(parts):
        return ".".join(parts)

    def _v1_inputs(inputs):
        out = {"required": {}}
        for i in inputs:
            options = i.as_dict()
            options.pop("optional", None)
            out.setdefault("optional" if i.optional else "required", {})[i.id] = (
                i.get_io_type(), options)
        return out

    def _parse(out, live, groups, prefix=None):
        prefix = prefix or []
        for group, inputs in groups.items():
            for name, value in inputs.items():
                if value[0] in DYNAMIC_INPUT_LOOKUP:
                    DYNAMIC_INPUT_LOOKUP[value[0]](out, live, value, group, prefix + [name])
                    continue
                key = _dotted(prefix + [name])
                out[group][key] = value
                if prefix:
                    out["dynamic_paths"][key] = key

    def get_finalized_class_inputs(d, live_inputs, include_hidden=False):
        """(the inputs the prompt opens, by group; the hidden group; a V3Data with the dynamic
        paths): ComfyUI 0.8's expansion of a V3 class's INPUT_TYPES() over a node's inputs."""
        d = dict(d)
        hidden = d.pop("hidden", None)
        out = {"required": {}, "optional": {}, "dynamic_paths": {}}
        _parse(out, live_inputs, d)
        if hidden is not None and include_hidden:
            out["hidden"] = hidden
        return out, hidden, {"dynamic_paths": out.pop("dynamic_paths")}

    def build_nested_inputs(values, v3_data):
        """The node's arguments: each input of a dynamic path moved to its place in a dict."""
        paths = v3_data.get("dynamic_paths")
        if paths is None:
            return values
        values = dict(values)
        nested = {}
        for key, path in paths.items():
            *parents, leaf = path.split(".")
            place = nested
            for p in parents:
                place = place.setdefault(p, {})
            value = values.pop(key, None)
            place[leaf] = (value, key) if v3_data.get("create_dynamic_tuple") else value
        values.update(nested)
        return values


class Schema:
    def __init__(self, node_id, display_name=None, category="sd", inputs=None, outputs=None,
                 hidden=None, description="", is_output_node=False, is_input_list=False,
                 is_deprecated=False, is_experimental=False, is_api_node=False,
                 not_idempotent=False, enable_expand=False):
        self.node_id = node_id
        self.display_name = display_name
        self.category = category
        self.inputs = inputs or []
        self.outputs = outputs or []
        self.hidden = hidden or []
        self.description = description
        self.is_output_node = is_output_node
        self.is_input_list = is_input_list
        self.is_deprecated = is_deprecated
        self.is_experimental = is_experimental
        self.is_api_node = is_api_node
        self.not_idempotent = not_idempotent
        self.enable_expand = enable_expand

    def finalize(self):
        """The hidden values an API node and an output node need, and an id for every output."""
        wanted = ([Hidden.auth_token_comfy_org, Hidden.api_key_comfy_org] if self.is_api_node
                  else []) + ([Hidden.prompt, Hidden.extra_pnginfo] if self.is_output_node else [])
        for kind in wanted:
            if kind not in self.hidden:
                self.hidden.append(kind)
        for k, output in enumerate(self.outputs):
            if output.id is None:
                output.id = "_%d_%s_" % (k, output.io_type)

    def get_v1_info(self, cls):
        inputs = {"required": {}}
        for i in self.inputs:
            options = i.as_dict()
            options.pop("optional", None)
            inputs.setdefault("optional" if i.optional else "required", {})[i.id] = (
                i.get_io_type(), options)
        for kind in self.hidden:
            inputs.setdefault("hidden", {})[kind.name] = (kind.value,)
        return NodeInfoV1(
            input=inputs,
            input_order={key: list(value) for key, value in inputs.items()},
            output=[o.io_type for o in self.outputs],
            output_is_list=[o.is_output_list for o in self.outputs],
            output_name=[o.display_name or o.io_type for o in self.outputs],
            output_tooltips=[o.tooltip or None for o in self.outputs],
            name=self.node_id, display_name=self.display_name, category=self.category,
            description=self.description, output_node=self.is_output_node,
            deprecated=self.is_deprecated, experimental=self.is_experimental,
            api_node=self.is_api_node,
            python_module=getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes"))


@dataclasses.dataclass
class NodeInfoV1:
    """Fifteen fields at a125cd84; 0.8 adds output_matchtypes after output_tooltips (None where
    no output is a MatchType, as here)."""
    input: dict = None
    input_order: dict = None
    output: list = None
    output_is_list: list = None
    output_name: list = None
    output_tooltips: list = None
    if V3_DATA:
        output_matchtypes: list = None
    name: str = None
    display_name: str = None
    description: str = None
    python_module: object = None
    category: str = None
    output_node: bool = None
    deprecated: bool = None
    experimental: bool = None
    api_node: bool = None


class NodeOutput(_NodeOutputInternal):
    def __init__(self, *args, ui=None, expand=None, block_execution=None):
        self.args = args
        self.ui = ui
        self.expand = expand
        self.block_execution = block_execution

    @property
    def result(self):
        return self.args if len(self.args) > 0 else None

    @classmethod
    def from_dict(cls, data):
        if V3_DATA:  # 0.8: the result's items as the outputs
            return cls(*data.get("result", ()), ui=data.get("ui"), expand=data.get("expand"))
        # As ComfyUI's at a125cd8, args= included: NodeOutput takes no such keyword, so a V3
        # execute that returns a dict fails there with a TypeError, and here too.
        return cls(args=data.get("result", ()), ui=data.get("ui"), expand=data.get("expand"))

    def __getitem__(self, index):
        return self.args[index]


class HiddenHolder:
    def __init__(self, unique_id, prompt, extra_pnginfo, dynprompt, auth_token_comfy_org,
                 api_key_comfy_org, **kwargs):
        self.unique_id = unique_id
        self.prompt = prompt
        self.extra_pnginfo = extra_pnginfo
        self.dynprompt = dynprompt
        self.auth_token_comfy_org = auth_token_comfy_org
        self.api_key_comfy_org = api_key_comfy_org

    def __getattr__(self, key):
        return None  # a hidden value the node did not ask for

    @classmethod
    def from_dict(cls, d):
        d = d or {}
        return cls(*(d.get(kind) for kind in (Hidden.unique_id, Hidden.prompt,
                                                 Hidden.extra_pnginfo, Hidden.dynprompt,
                                                 Hidden.auth_token_comfy_org,
                                                 Hidden.api_key_comfy_org)))

    if V3_DATA:
        @classmethod
        def from_v3_data(cls, v3_data):
            return cls.from_dict(v3_data["hidden_inputs"] if v3_data else None)


class _ClassProperty:
    def __init__(self, getter):
        self.getter = getter

    def __get__(self, instance, owner):
        return self.getter(owner)


class ComfyNode(_ComfyNodeInternal):
    hidden = None
    SCHEMA = None
    RELATIVE_PYTHON_MODULE = None  # set by ComfyUI's loader: "custom_nodes.<pack>"

    @classmethod
    def define_schema(cls):
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs):
        raise NotImplementedError

    # ComfyUI's base class declares these; a node class that does not override them has none.
    @classmethod
    def validate_inputs(cls, **kwargs):
        raise NotImplementedError

    @classmethod
    def fingerprint_inputs(cls, **kwargs):
        raise NotImplementedError

    @classmethod
    def check_lazy_status(cls, **kwargs):
        return [name for name in kwargs if kwargs[name] is None]

    @classmethod
    def GET_BASE_CLASS(cls):
        return ComfyNode

    @classmethod
    def GET_SCHEMA(cls):
        cls.SCHEMA = cls.define_schema()
        cls.SCHEMA.finalize()
        return cls.SCHEMA

    @classmethod
    def GET_NODE_INFO_V1(cls):
        """What ComfyUI's /object_info answers for the class (server.py's node_info)."""
        return dataclasses.asdict(cls.GET_SCHEMA().get_v1_info(cls))

    # V1's surface, which ComfyUI's own V3 base class has too: a V3 class is told apart by its
    # base, never by INPUT_TYPES missing.
    @classmethod
    def INPUT_TYPES(cls, include_hidden=True, return_schema=False):
        schema = cls.GET_SCHEMA()
        out = schema.get_v1_info(cls).input
        if not include_hidden:
            out.pop("hidden", None)
        return (out, schema) if return_schema else out

    FUNCTION = _ClassProperty(lambda cls: "EXECUTE_NORMALIZED_ASYNC"
                              if inspect.iscoroutinefunction(cls.execute)
                              else "EXECUTE_NORMALIZED")

    @classmethod
    def _normalized(cls, value):
        if value is None:
            return NodeOutput()
        if isinstance(value, NodeOutput):
            out = value
        elif isinstance(value, tuple):
            out = NodeOutput(*value)
        elif isinstance(value, dict):
            out = NodeOutput.from_dict(value)
        else:
            raise Exception("Invalid return type from node: %s" % type(value))
        if out.expand is not None and not cls.GET_SCHEMA().enable_expand:
            raise Exception("Node %s is not expandable, but expand included in NodeOutput"
                            % cls.__name__)
        return out

    @classmethod
    def EXECUTE_NORMALIZED(cls, *args, **kwargs):
        return cls._normalized(cls.execute(*args, **kwargs))

    @classmethod
    async def EXECUTE_NORMALIZED_ASYNC(cls, *args, **kwargs):
        return cls._normalized(await cls.execute(*args, **kwargs))

    # A class attribute of the node's (INPUT_IS_LIST = True) wins over these, as over the real
    # base's class properties.
    INPUT_IS_LIST = _ClassProperty(lambda cls: cls.GET_SCHEMA().is_input_list)
    OUTPUT_IS_LIST = _ClassProperty(
        lambda cls: [o.is_output_list for o in cls.GET_SCHEMA().outputs])

    if V3_DATA:
        @classmethod
        def PREPARE_CLASS_CLONE(cls, v3_data):
            """A copy of the class, per call, whose `hidden` holds v3_data["hidden_inputs"]
            (0.7 on: the executor passes a V3Data)."""
            clone = type(cls.__name__, (cls,), {"__module__": cls.__module__})
            clone.hidden = HiddenHolder.from_v3_data(v3_data)
            return clone
    else:
        @classmethod
        def PREPARE_CLASS_CLONE(cls, hidden_inputs):
            """A copy of the class, per call, whose `hidden` holds the call's hidden values."""
            clone = type(cls.__name__, (cls,), {"__module__": cls.__module__})
            clone.hidden = HiddenHolder.from_dict(hidden_inputs)
            return clone
